# Worker image for Dataflow (and other portable runners): Beam's Python 3.11 SDK image with bertcorpus's
# pipeline dependencies preinstalled, so workers start without installing anything. TensorFlow is not
# needed on workers (the jobs write TFRecords without it) and is not installed.
#
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/bertcorpus-worker:0.3.0 .
#   docker push REGION-docker.pkg.dev/PROJECT/REPO/bertcorpus-worker:0.3.0
#
# then launch with --sdk_container_image=<that tag> --sdk_location=container (docs/dataflow.md). The image's Beam
# must be the launching environment's: build with --build-arg BEAM_VERSION=$(python -c "import apache_beam as b;
# print(b.__version__)") when yours is not the default below.
ARG BEAM_VERSION=2.77.0
FROM apache/beam_python3.11_sdk:${BEAM_VERSION}

WORKDIR /opt/bertcorpus
# The same ranges as pyproject.toml's [project] dependencies; tests/test_dataflow_packaging.py checks this.
RUN pip install --no-cache-dir \
    "apache-beam[gcp]>=2.71,<3" \
    "tokenizers>=0.22,<0.24" \
    "pyarrow>=17,<26" \
    "zstandard>=0.22,<1" \
    "tqdm>=4.66,<5" \
    "numpy>=1.26,<3" \
    "PyYAML>=6,<7" \
    "google-crc32c>=1.5,<2" \
    "matplotlib>=3.8,<4" \
    "charset-normalizer>=3.3,<4" \
    "setuptools>=77" \
    "build>=1.2,<2"

COPY pyproject.toml setup.py README.md ./
# The package, its package data (the demo's samples among them) included: the plain tree under src/.
COPY src ./src
COPY beam_jobs.yaml ./
RUN pip install --no-cache-dir --no-deps . && python -c "import bertcorpus.pipeline.create.job, bertcorpus.transforms.tfrecord, bertcorpus.wordpiece.tokenizer"
# Chinese and --language auto need their extras on the workers too: --build-arg EXTRAS=zh,langid
ARG EXTRAS=""
RUN if [ -n "$EXTRAS" ]; then pip install --no-cache-dir ".[$EXTRAS]"; fi

# The SDK harness entry point of the base image stays as it is.
