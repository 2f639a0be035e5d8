import json,sys,glob,os,collections,statistics as st
d=sys.argv[1]  # python3 docs/bench/cached-gets/table.py docs/bench/cached-gets > table.md
rows=collections.defaultdict(dict)
for f in sorted(glob.glob(d+'/*.jsonl')):
    b=os.path.basename(f).rsplit('-r',1); binr=b[0].replace('pagewise-','').replace('-rocks',''); r=b[1].split('.')[0]
    for line in open(f):
        j=json.loads(line); w=j['spec']; e=j['engine']
        if not w.startswith('readrandom'): continue
        t='5%' if 'cache=5%' in w else ('2T' if 'threads=2' in w else '1T')
        rows[(binr,r)][(e,t)]=j['ops_per_s']
print("| binary, round | B+tree 1T (x LMDB) | B+tree 2T/1T | B-eps 1T (x LMDB) | B-eps 2T/1T | LMDB 1T | LMDB 2T/1T | 5% cache: B+tree / B-eps / LMDB |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
agg=collections.defaultdict(list)
for (b,r),v in sorted(rows.items()):
    l1=v[('lmdb','1T')]
    cells=[]
    for e in ['pagewise','pagewise-bepsilon','lmdb']:
        a,c=v[(e,'1T')],v[(e,'2T')]
        cells.append(f"{a:,.0f}" + ("" if e=='lmdb' else f" ({a/l1:.2f}x)")); cells.append(f"{c/a:.2f}x")
        agg[(b,e,'x')].append(a/l1); agg[(b,e,'2')].append(c/a)
    cells.append(" / ".join(f"{v.get((e,'5%'),0):,.0f}" for e in ['pagewise','pagewise-bepsilon','lmdb']))
    print(f"| `{b}` r{r} | "+" | ".join(cells)+" |")
for k,vals in sorted(agg.items()):
    print(k, "median %.2f range %.2f-%.2f" % (st.median(vals), min(vals), max(vals)))
