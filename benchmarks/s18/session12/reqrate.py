import glob,re,sys
# requests/s the pod-grouper got answered, per window and over the catch-up (until PATCH count reaches 20000)
for d in sys.argv[1:]:
    files=sorted(glob.glob(d+'/metrics/metrics-*.txt'))
    pts=[]
    for f in files:
        t=int(f[-8:-4]); tot=0; patch=0
        for line in open(f):
            m=re.match(r'rest_client_requests_total\{(.*)\} (\S+)$',line.strip())
            if m:
                tot+=float(m.group(2))
                if 'method="PATCH"' in m.group(1): patch+=float(m.group(2))
        pts.append((t,tot,patch))
    # catch-up window: from first patch to the sample where patch reached 20000
    start=next(i for i,p in enumerate(pts) if p[2]>0)-1
    end=next((i for i,p in enumerate(pts) if p[2]>=20000),len(pts)-1)
    a,b=pts[max(start,0)],pts[end]
    md=open(d+'/podgrouper-catchup.md').read().strip().splitlines()[-1].split('|')
    ceil=float(md[-2])
    rate=(b[1]-a[1])/(b[0]-a[0])
    wins=[(pts[i+1][1]-pts[i][1])/(pts[i+1][0]-pts[i][0]) for i in range(max(start,0),end)]
    print(f"{d:28s} requests/s over the catch-up {rate:4.0f} (ceiling {ceil:.0f} patches/s → {rate/ceil:4.0%}); per 5 s: {' '.join('%.0f'%w for w in wins)}")
