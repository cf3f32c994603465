#!/usr/bin/env python3
"""extract.py README NAME: the fenced block after `<!-- test: NAME -->`."""
import re
import sys

text = open(sys.argv[1]).read()
m = re.search(r"<!-- test: %s -->\s*```\w*\n(.*?)```" % re.escape(sys.argv[2]), text, re.S)
if not m:
    sys.exit("no block '<!-- test: %s -->' in %s" % (sys.argv[2], sys.argv[1]))
sys.stdout.write(m.group(1))
