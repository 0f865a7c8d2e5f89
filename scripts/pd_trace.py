#!/usr/bin/env python3
"""Per-phase timeline of a persistent decode run from EMBER_PD_TRACE_FILE (backend/cuda/persistent_plan.cpp):
python3 scripts/pd_trace.py FILE [RUN_INDEX (default: last)] [all]. Columns (us): sync = earliest block past the
wait − latest block done with the previous phase; skew = spread of the blocks' wait exits; tail = latest done −
latest past the wait; medwk = median per-block work; ring = longest ring-slot wait of one block (thread 0)."""
import struct, sys, numpy as np, collections
def load(path):
    data=open(path,'rb').read(); off=0; runs=[]
    while off < len(data):
        n,G=struct.unpack_from('<qq',data,off); off+=16
        meta=np.frombuffer(data,dtype=np.int32,count=3*n,offset=off).reshape(n,3); off+=12*n
        t=np.frombuffer(data,dtype=np.uint64,count=n*G*4,offset=off).reshape(n,G,4).astype(np.int64); off+=8*n*G*4
        runs.append((meta,t))
    return runs
runs=load(sys.argv[1]); meta,t=runs[int(sys.argv[2]) if len(sys.argv)>2 else -1]
n,G=t.shape[0],t.shape[1]
kinds=['gemv','gdn','attn','comb']
prev_end=None; rows=[]
for p in range(n):
    entry=t[p,:,0]; after=t[p,:,1]; end=t[p,:,2]; ring=t[p,:,3]
    pe = prev_end if prev_end is not None else entry.min()
    rows.append((p,kinds[meta[p,0]],meta[p,1],meta[p,2], (after.min()-pe)/1e3, (after.max()-after.min())/1e3, (end.max()-after.max())/1e3, np.median(end-after)/1e3, ring.max()/1e3, (end.max()-pe)/1e3))
    prev_end=end.max()
print("  p kind    rows      K |  sync |  skew |  tail | medwk | ring  | total")
sel = rows if len(sys.argv)>3 else rows[:14]+rows[-4:]
for r in sel: print("%3d %-5s %6d %6d | %5.2f | %5.2f | %5.2f | %5.2f | %5.2f | %6.2f"%r)
agg=collections.defaultdict(lambda: np.zeros(6))
for r in rows: agg[r[1]]+=np.array([1,r[4],r[5],r[6],r[7],r[9]])
for k,v in agg.items(): print(k, "n=%d sync=%.1f skew=%.1f tail=%.1f medwork=%.1f total=%.1f"%tuple(v))
