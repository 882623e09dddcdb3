package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// jobGang is a Job of n one-GPU pods made one gang by muster.io/min-member,
// with podSpecExtra (YAML at the pod spec's indentation) added to its pod
// template.
func jobGang(n int, podSpecExtra string) string {
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
metadata:
  name: spread
  namespace: team-a
  annotations:
    muster.io/min-member: "%d"
spec:
  parallelism: %d
  completions: %d
  template:
    metadata:
      labels:
        app: spread
    spec:
      restartPolicy: Never
      tolerations:
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
%s      containers:
      - name: c
        image: x
        resources:
          limits:
            nvidia.com/gpu: "1"
`, n, n, n, podSpecExtra)
}

const antiAffinityYAML = `      affinity:
        podAntiAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
          - topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels: {app: spread}
`

const zoneSpreadYAML = `      topologySpreadConstraints:
      - maxSkew: 1
        topologyKey: topology.kubernetes.io/zone
        whenUnsatisfiable: DoNotSchedule
        labelSelector:
          matchLabels: {app: spread}
`

// TestFitJudgesWithTheProfile: fit judges members with the shipped
// profile's own plugins, those that see other pods included (inter-pod
// anti-affinity, topology spread), and with the members placed before each
// counted: the cases the scheduler refuses or places differently from what
// resources alone allow.
func TestFitJudgesWithTheProfile(t *testing.T) {
	four := []fitNode{{name: "a1", zone: "a", gpus: 4}, {name: "a2", zone: "a", gpus: 4}, {name: "b1", zone: "b", gpus: 4}, {name: "b2", zone: "b", gpus: 4}}
	for _, tc := range []struct {
		name string
		job  string
		// want is the gang's members per node, or the start of the
		// reason it does not fit.
		want string
	}{
		{"anti-affinity, one member per node", jobGang(4, antiAffinityYAML), "a1=1,a2=1,b1=1,b2=1"},
		{"anti-affinity, five members on four nodes", jobGang(5, antiAffinityYAML),
			"gang team-a/spread: needs room for 5 members; best placement fits 4 of 5 members; with 4 members placed, the filters refuse the next"},
		{"zone spread", jobGang(6, zoneSpreadYAML), "a1=3,b1=3"},
		{"without constraints, best fit", jobGang(6, ""), "a1=4,a2=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := run(t, fitCluster(t, four, nil), tc.job, "fit", "-f", "-", "-o", "json", "--no-preemption")
			if res.code != 0 {
				t.Fatalf("exit %d: %s", res.code, res.stderr)
			}
			g := decodeFit(t, res.stdout).Clusters[0].Workloads[0].Gangs[0]
			got := g.Reason
			if g.Fits {
				got = fitNodeCounts(g)
			}
			if !strings.HasPrefix(got, tc.want) {
				t.Errorf("got %q, want it to start %q", got, tc.want)
			}
		})
	}
}

// TestFitReadsTheSchedulerConfig: --scheduler-config replaces the shipped
// profile; one without InterPodAffinity places what the shipped one
// refuses, and an invalid one is a usage error naming the file.
func TestFitReadsTheSchedulerConfig(t *testing.T) {
	dir := t.TempDir()
	noAffinity := filepath.Join(dir, "no-affinity.yaml")
	if err := os.WriteFile(noAffinity, []byte(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: muster-scheduler
  plugins:
    multiPoint:
      disabled:
      - name: InterPodAffinity
`), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes := []fitNode{{name: "a1", zone: "a", gpus: 8}}
	res := run(t, fitCluster(t, nodes, nil), jobGang(2, antiAffinityYAML), "fit", "-f", "-", "-o", "json", "--scheduler-config", noAffinity)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	c := decodeFit(t, res.stdout).Clusters[0]
	if g := c.Workloads[0].Gangs[0]; !g.Fits || fitNodeCounts(g) != "a1=2" {
		t.Errorf("without InterPodAffinity: fits %v on %s (%s), want both members on a1", g.Fits, fitNodeCounts(g), g.Reason)
	}
	if want := noAffinity + ", profile muster-scheduler"; c.Profile != want {
		t.Errorf("profile %q, want %q", c.Profile, want)
	}

	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: KubeSchedulerConfiguration\napiVersion: kubescheduler.config.k8s.io/v1\nprofiles: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res = run(t, fitCluster(t, nodes, nil), jobGang(2, ""), "fit", "-f", "-", "--scheduler-config", bad)
	if res.code != ExitUsage || !strings.Contains(res.stderr, bad) {
		t.Errorf("exit %d, stderr %q; want a usage error naming %s", res.code, res.stderr, bad)
	}
}

// TestFitLeavesRoomForNominatedPods: a pending pod nominated on a node (a
// preemptor waiting for its victims) holds its room there, in fit as in
// the scheduler's filters; the gang goes elsewhere, or does not fit.
func TestFitLeavesRoomForNominatedPods(t *testing.T) {
	nodes := []fitNode{{name: "a1", zone: "a", gpus: 4}, {name: "a2", zone: "a", gpus: 4}}
	nominated := busyPod("preemptor", "", 4, corev1.PodPending)
	nominated.Status.NominatedNodeName = "a1"
	res := run(t, fitCluster(t, nodes, nil, nominated), jobGang(4, ""), "fit", "-f", "-", "-o", "json", "--no-preemption")
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	if g := decodeFit(t, res.stdout).Clusters[0].Workloads[0].Gangs[0]; !g.Fits || fitNodeCounts(g) != "a2=4" {
		t.Errorf("fits %v on %s (%s); want all four members on a2, around the pod nominated on a1", g.Fits, fitNodeCounts(g), g.Reason)
	}
	res = run(t, fitCluster(t, nodes, nil, nominated), jobGang(5, ""), "fit", "-f", "-", "-o", "json", "--no-preemption")
	g := decodeFit(t, res.stdout).Clusters[0].Workloads[0].Gangs[0]
	if want := "counting as used the room of 1 pod nominated to these nodes (other/preemptor)"; g.Fits || !strings.Contains(g.Reason, want) {
		t.Errorf("fits %v (%s); want no fit, the reason naming the nominated pod: %q", g.Fits, g.Reason, want)
	}
}
