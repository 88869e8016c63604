"""The extraction jobs: Wikipedia dumps and book files → documents."""
