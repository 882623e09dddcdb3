import glob,re,sys
files=sorted(glob.glob(sys.argv[1]+'/metrics-*.txt'))
def parse(f):
    d={}
    for line in open(f):
        if line.startswith('#') or not line.strip(): continue
        m=re.match(r'(\S+?)(\{.*\})? (\S+)$',line.strip())
        if not m: continue
        d[(m.group(1),m.group(2) or '')]=float(m.group(3))
    return d
prev=None
print("| s since start | PATCH pods | PATCH mean ms | POST mean ms (n) | GET mean ms (n) | reconciles | reconcile mean ms | queue depth | queue wait mean s |")
print("|---|---|---|---|---|---|---|---|---|")
for f in files:
    t=int(f[-8:-4]); d=parse(f)
    def s(metric, **lbl):
        tot=0
        for (n,l),v in d.items():
            if n==metric and all(f'{k}="{v2}"' in l for k,v2 in lbl.items()): tot+=v
        return tot
    cur={
     'pc':s('rest_client_request_duration_seconds_count',verb='PATCH'),'ps':s('rest_client_request_duration_seconds_sum',verb='PATCH'),
     'oc':s('rest_client_request_duration_seconds_count',verb='POST'),'os':s('rest_client_request_duration_seconds_sum',verb='POST'),
     'gc':s('rest_client_request_duration_seconds_count',verb='GET'),'gs':s('rest_client_request_duration_seconds_sum',verb='GET'),
     'rc':s('muster_podgrouper_reconcile_duration_seconds_count'),'rs':s('muster_podgrouper_reconcile_duration_seconds_sum'),
     'qd':s('workqueue_depth',name='muster_podgrouper'),
     'qc':s('workqueue_queue_duration_seconds_count',name='muster_podgrouper'),'qs':s('workqueue_queue_duration_seconds_sum',name='muster_podgrouper'),
    }
    if prev and (cur['pc']-prev['pc'])>0:
        dd={k:cur[k]-prev[k] for k in cur}
        f_=lambda a,b: (1000*dd[a]/dd[b]) if dd[b] else 0
        print(f"| {t} | {dd['pc']:.0f} | {f_('ps','pc'):.1f} | {f_('os','oc'):.1f} ({dd['oc']:.0f}) | {f_('gs','gc'):.1f} ({dd['gc']:.0f}) | {dd['rc']:.0f} | {f_('rs','rc'):.1f} | {cur['qd']:.0f} | {f_('qs','qc')/1000:.1f} |")
    prev=cur
