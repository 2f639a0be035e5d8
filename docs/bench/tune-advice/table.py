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
    adv=kib(b['recommended_node_bytes']) if 'recommended_node_bytes' in b else '-'
    rows.append(f"| {name} | **{head}** | {hm:,.0f} | {hm/best_all*100:.1f}% | B+tree {sizes[page]/pbest*100:.1f}% of {pbest:,.0f} | {tab} | {adv} | {ntab} | {kd} | {'; '.join(notes) or '-'} | {v['elapsed_secs']:.0f} s |")
print("| run | headline (tuned.json) | its measured mix ops/s | of the best measured, both kinds | headline page of the best B+tree | B+tree mix ops/s per page | node size advised (verified around) | B-epsilon mix ops/s per node | kind decided by | ties, contradictions | wall time |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
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

# The B-epsilon node size advised before verifying against the node size the
# previous run of the profile measured best, and the corrected model's mix
# error (out of sample, scans included) over every measured node size.
prev={}
for f in sorted(glob.glob(os.path.join(HERE, '*-r*.json')), key=lambda f:(f.rsplit('-r',1)[0], int(f.rsplit('-r',1)[1][:-5]))):
    name=os.path.basename(f)[:-5]; prof=name.rsplit('-r',1)[0]
    try: v=json.load(open(f))
    except Exception: continue
    b=v['verification'].get('bepsilon')
    if not b: continue
    best=b['best_measured_node_bytes']; adv=b['recommended_node_bytes']
    errs=[abs(s['corrected_mix_ops']/s['mix_ops']-1) for s in b['sizes'] if s['corrected_mix_ops']>0]
    was=prev.get(prof)
    print(f"{name}: advised {kib(adv)}" + (f" (previous run's best {kib(was)}, {abs(__import__('math').log2(adv/was)):.0f} steps away)" if was else " (fresh directory: device-only)") + f", measured best {kib(best)}, corrected model's first {kib(b['corrected_best_node_bytes'])}, mix error median {sorted(errs)[len(errs)//2]*100:.0f}% max {max(errs)*100:.0f}%")
    prev[prof]=best

# One row per profile (docs/benchmarks.md); the per-run table above goes to
# table.md beside this script when run with --write.
def runs_of(prof):
    fs=glob.glob(os.path.join(HERE, f'{prof}-r*.json'))
    out=[]
    for f in sorted(fs, key=lambda f:int(f.rsplit('-r',1)[1][:-5])):
        try: out.append(json.load(open(f)))
        except Exception: pass
    return out
def head_of(v):
    if v['tree_kind']=='bepsilon': return f"B-epsilon {kib(v['bepsilon']['node_bytes'])}"
    return f"B+tree {kib(v['best_page_size'])}"
print()
print("| profile | runs | headline >= 97% of the best measured | headlines | kind decided | B-epsilon node size advised, run by run (run 1 device-only) | measured best node size | corrected model's first | wall time |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for prof in ['real','hdd','x25e','nvme']:
    rs=runs_of(prof)
    if not rs: continue
    good=0; heads=collections.Counter(); ahead=0; ties=0; adv=[]; best=[]; corr=[]; wall=[]
    for v in rs:
        ver=v['verification']
        sizes={s['page_size']:s['measured']['mix_ops'] for s in ver['sizes']}
        b=ver.get('bepsilon') or {'sizes':[]}
        nodes={s['shape']['node_bytes']:s['mix_ops'] for s in b['sizes']}
        hm=nodes[v['bepsilon']['node_bytes']] if v['tree_kind']=='bepsilon' else sizes[v['best_page_size']]
        good+= hm>=0.97*max(list(sizes.values())+list(nodes.values()))
        heads[head_of(v)]+=1
        k=v['answer']['kind']
        if k:
            if k['tie']: ties+=1
            else: ahead+=1
        if b['sizes']:
            adv.append(kib(b['recommended_node_bytes'])); best.append(kib(b['best_measured_node_bytes'])); corr.append(kib(b['corrected_best_node_bytes']))
        wall.append(round(v['elapsed_secs']))
    hs=', '.join(f"{h} x{n}" for h,n in heads.most_common())
    print(f"| {prof} | {len(rs)} | {good} | {hs} | measured ahead {ahead}, tie {ties} | {' / '.join(adv)} | {' / '.join(best)} | {' / '.join(corr)} | {min(wall)}-{max(wall)} s |")
