"""scripts/measure/oracle/py_json_regex.py -- CPython doing json and regex
work, for the oracle's validation on real programs (traced by heaptrack or
mtrace with PYTHONMALLOC=malloc, so every object is a malloc).

Builds N records (default 20000), dumps them to JSON text, parses it back,
runs three regular expressions over the text, keeps every 100th record and
drops the rest.  Deterministic: no randomness, no clock.
"""
import json
import re
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
records = [{"id": i, "name": "user%05d" % i, "tags": ["t%d" % (i % 7), "x"],
            "score": i * 0.5, "email": "user%d@example.org" % i}
           for i in range(n)]
text = json.dumps(records)
back = json.loads(text)
emails = re.findall(r"user\d+@example\.org", text)
ids = [int(m.group(1)) for m in re.finditer(r'"id": (\d+)', text)]
swapped = re.sub(r"t(\d)", r"T\1", text)
kept = back[::100]
del records, back, text, emails, ids, swapped
print(len(kept))
