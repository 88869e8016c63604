"""The loader of pretraining batches, under the public name: `from bertcorpus.loader import PretrainingLoader`.

python -m bertcorpus.loader index OUT --to DIR    index files for the `tfrecord` package (docs/loader.md)
"""

from bertcorpus.trainer.loader import LAYOUTS, LoaderError, PretrainingLoader, main, write_tfrecord_indexes

__all__ = ["LAYOUTS", "LoaderError", "PretrainingLoader", "write_tfrecord_indexes"]

if __name__ == "__main__":
    raise SystemExit(main())
