# Beam stages workers' code with --setup_file, which must be a setup.py; the metadata lives in pyproject.toml.
from setuptools import setup

setup()
