"""write_golden: how the generators beside it write tests/golden/.

  from golden_io import write_golden
  write_golden("resnet_golden.json", golden, indent=1)

The scripts run from anywhere (their own folder is on sys.path).
"""
import json
import os

GOLDEN_DIR = os.path.dirname(os.path.abspath(__file__))  # tests/golden/, this file's own folder


def write_golden(name, data, **dump_options):
    """Writes `data` as tests/golden/NAME: json.dump with `dump_options`
    (indent, separators), then a newline; prints the path."""
    path = os.path.join(GOLDEN_DIR, name)
    with open(path, "w") as f:
        json.dump(data, f, **dump_options)
        f.write("\n")
    print(f"wrote {os.path.normpath(path)}")
