"""scripts/measure/oracle/make_csv.py -- a deterministic CSV for the
real-program traces of the oracle's validation (sqlite3 imports it, gzip
and xz compress it).

Usage: make_csv.py OUT [ROWS]   (default 20000 rows, about 1.3 MB; run.py
       uses 8000)
"""
import sys

out = sys.argv[1]
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
with open(out, "w") as f:
    f.write("id,name,city,score,note\n")
    for i in range(rows):
        note = " ".join(words[(i * k) % 7] for k in range(1, 2 + i % 9))
        f.write("%d,user%05d,%s,%d.%02d,\"%s\"\n"
                % (i, i, words[i % 7].title(), i * 37 % 1000, i % 100, note))
