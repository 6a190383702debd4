"""``python -m streamdetect`` runs the CLI."""

from streamdetect.cli.main import main

main()
