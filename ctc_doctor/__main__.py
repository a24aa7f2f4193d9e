"""`python -m ctc_doctor` is the `ctc-doctor` command."""

from .cli import main

if __name__ == "__main__":
    main()
