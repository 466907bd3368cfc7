"""What a profile shows and leaves: `report` (the files in `--out`), `figure` (the PNG), `view` (live)."""
