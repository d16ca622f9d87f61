"""``python -m gradcli`` behaves as the ``gradcli`` command."""

from .cli import main

if __name__ == "__main__":
    main()
