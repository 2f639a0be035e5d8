import json,glob,os,sys
HERE=os.path.dirname(os.path.abspath(__file__))
def kib(b): 
    return f"{b//1048576} MiB" if b>=1048576 else f"{b//1024} KiB"
rows=[]
for f in sorted(glob.glob(os.path.join(HERE, '*.json'))):
    name=os.path.basename(f)[:-5]
    try: v=json.load(open(f))
    except Exception as e: print(name,'unreadable',e,file=sys.stderr); continue
    ver=v['verification']; a=v['answer']
    sizes={s['page_size']:s['measured']['mix_ops'] for s in ver['sizes']}
    b=ver.get('bepsilon') or {'sizes':[]}
    nodes={s['shape']['node_bytes']:s['mix_ops'] for s in b['sizes']}
    page=v['best_page_size']; kind=v['tree_kind']
    pbest=max(sizes.values())
    nbest=max(nodes.values()) if nodes else 0
    if kind=='bepsilon':
        n=v['bepsilon']['node_bytes']; head=f"B-epsilon {kib(n)} nodes, fanout {v['bepsilon']['fanout']}, {kib(v['bepsilon']['basement_bytes'])} basements"; hm=nodes[n]
    else:
        head=f"B+tree {kib(page)}"; hm=sizes[page]
    best_all=max(pbest,nbest)
    pp=a['page_pick']; np_=a['node_pick']
    tab=' / '.join(f"{kib(p)} {sizes[p]:,.0f}" for p in sorted(sizes))
    ntab=' / '.join(f"{kib(p)} {nodes[p]:,.0f}" for p in sorted(nodes))
    notes=[]
    if pp['tie_with']: notes.append(f"page tie with {kib(pp['tie_with']['id'])}")
    if pp['contradicted']: notes.append(f"model's {kib(pp['model_first']['id'])} contradicted")
    if np_ and np_['tie_with']: notes.append(f"node tie with {kib(np_['tie_with']['id'])}")
    if np_ and np_['contradicted']: notes.append(f"model's {kib(np_['model_first']['id'])} nodes contradicted")
    k=a['kind']
    kd=f"{k['deciding_op']}" + (f" (tie within {k['tolerance']*100:.0f}%)" if k['tie'] else "") if k else "-"
    rows.append(f"| {name} | **{head}** | {hm:,.0f} | {hm/best_all*100:.1f}% | B+tree {sizes[page]/pbest*100:.1f}% of {pbest:,.0f} | {tab} | {ntab} | {kd} | {'; '.join(notes) or '-'} | {v['elapsed_secs']:.0f} s |")
print("| run | headline (tuned.json) | its measured mix ops/s | of the best measured, both kinds | headline page of the best B+tree | B+tree mix ops/s per page | B-epsilon mix ops/s per node | kind decided by | ties, contradictions | wall time |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
print("\n".join(rows))
# Per profile: runs whose headline measured >= 97% of the best measured (both
# kinds), and whose page measured >= 97% of the best verified B+tree size.
import collections
c=collections.defaultdict(lambda:[0,0,0,[]])
for f in sorted(glob.glob(os.path.join(HERE, '*-r*.json'))):
    name=os.path.basename(f)[:-5]; prof=name.rsplit('-r',1)[0]
    try: v=json.load(open(f))
    except Exception: continue
    ver=v['verification']
    sizes={s['page_size']:s['measured']['mix_ops'] for s in ver['sizes']}
    nodes={s['shape']['node_bytes']:s['mix_ops'] for s in (ver.get('bepsilon') or {'sizes':[]})['sizes']}
    hm=nodes[v['bepsilon']['node_bytes']] if v['tree_kind']=='bepsilon' else sizes[v['best_page_size']]
    best=max(list(sizes.values())+list(nodes.values()))
    c[prof][0]+=1; c[prof][1]+= hm>=0.97*best; c[prof][2]+= sizes[v['best_page_size']]>=0.97*max(sizes.values()); c[prof][3].append(round(v['elapsed_secs']))
print()
for p,(n,h,b,t) in sorted(c.items()): print(f"{p}: {n} runs, headline >= 97% of best in {h}, page >= 97% of best B+tree in {b}, wall {min(t)}-{max(t)} s")
