"""nodejs plugin, v8 mode (stacks read from outside the process) on Node.js
18: the cases of tests/workloads/nodejs/v8cases.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "workloads", "nodejs"))
import v8cases  # noqa: E402

v8cases.run(18)
