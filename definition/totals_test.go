package definition

import (
	"fmt"
	"strings"
	"testing"
)

// groupSizeDef is written the way the Workload Map catalog writes a
// leader/worker set: counts are totals (the worker count already holds
// every group's workers), and the gang's only member is a component
// without pods whose own count is the size of one group.
const groupSizeDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: groups}
spec:
  structureDefinition:
    rootComponent:
      name: set
      kind: {group: example.com, version: v1, kind: Set}
    childComponents:
      - name: group
        ownerRef: set
        scaleDefinition: {replicasPath: .spec.size}
      - name: leader
        ownerRef: group
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition: {replicasPath: .spec.replicas // 1}
        podSelector:
          componentTypeSelector: {keyPath: .metadata.labels.role, value: leader}
      - name: worker
        ownerRef: group
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition: {replicasPath: (.spec.replicas // 1) * ((.spec.size // 1) - 1)}
        podSelector:
          componentTypeSelector: {keyPath: .metadata.labels.role, value: worker}
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - name: group
          members:
            - componentName: group
              groupByKeyPaths: [.metadata.labels.group]
`

// scopeDef groups the same pods per replica of the root, whose own count is
// the number of groups: the totals are divided by it.
const scopeDef = `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: groups}
spec:
  structureDefinition:
    rootComponent:
      name: set
      kind: {group: example.com, version: v1, kind: Set}
      scaleDefinition: {replicasPath: .spec.replicas // 1}
    childComponents:
      - name: leader
        ownerRef: set
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition: {replicasPath: .spec.replicas // 1}
        podSelector:
          componentTypeSelector: {keyPath: .metadata.labels.role, value: leader}
      - name: worker
        ownerRef: set
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition:
          replicasPath: (.spec.replicas // 1) * ((.spec.size // 1) - 1)
          minReplicasPath: .spec.minWorkers
        podSelector:
          componentTypeSelector: {keyPath: .metadata.labels.role, value: worker}
  optimizationInstructions:
    gangScheduling:
      podGroups:
        - name: group
          members:
            - {componentName: leader, groupByKeyPaths: [.metadata.labels.group]}
            - {componentName: worker, groupByKeyPaths: [.metadata.labels.group]}
`

// TestGangSizeUnderTotals: a per-group gang's min-member is what the
// operator creates per group, whichever way the definition says it, and
// never the product of the group count and the pods of every group.
func TestGangSizeUnderTotals(t *testing.T) {
	for _, tc := range []struct {
		name, def string
		spec      string
		pods      int64  // all pods of the workload
		plans     string // "<instances>x<minMember>"
		cpu       string // min-resources of one gang instance
	}{
		// Workload Map's own engine gives 32 (the member's 4 times the 8
		// pods below it); the operator makes 2 groups of 4 pods.
		{"member's own count, 2 groups of 4", groupSizeDef, "{replicas: 2, size: 4}", 8, "2x4", "4"},
		{"member's own count, 1 group of 2", groupSizeDef, "{replicas: 1, size: 2}", 2, "1x2", "2"},
		{"member's own count, 3 groups of 1", groupSizeDef, "{replicas: 3, size: 1}", 3, "3x1", "1"},
		{"scope's replicas, 2 groups of 4", scopeDef, "{replicas: 2, size: 4}", 8, "2x4", "4"},
		{"scope's replicas, 1 group of 2", scopeDef, "{replicas: 1, size: 2}", 2, "1x2", "2"},
		// 2 of the 6 workers needed in all: 1 per group.
		{"scope's replicas with a minimum", scopeDef, "{replicas: 2, size: 4, minWorkers: 2}", 8, "2x2", "2"},
		// 3 workers over 2 groups: rounded up, never loosened.
		{"uneven minimum rounds up", scopeDef, "{replicas: 2, size: 4, minWorkers: 3}", 8, "2x3", "3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := compileT(t, tc.def)
			root := objT(t, "apiVersion: example.com/v1\nkind: Set\nmetadata: {name: s}\nspec: "+
				strings.TrimSuffix(tc.spec, "}")+", template: {spec: {containers: [{name: c, resources: {requests: {cpu: 1}}}]}}}")
			w, err := c.Extract(ctxT, root)
			if err != nil {
				t.Fatal(err)
			}
			var pods int64
			for _, comp := range w.Components {
				for _, in := range comp.Instances {
					if comp.HasPods {
						pods += in.Pods
					}
				}
			}
			if pods != tc.pods {
				t.Errorf("pods = %d, want %d", pods, tc.pods)
			}
			plans, err := c.GangPlans(ctxT, root)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range plans {
				cpu := p.MinResources["cpu"]
				got = append(got, fmt.Sprintf("%dx%d cpu=%s", p.Instances, p.MinMember, cpu.String()))
			}
			if want := tc.plans + " cpu=" + tc.cpu; strings.Join(got, ",") != want {
				t.Errorf("plans %v, want %s", got, want)
			}
			g, err := c.GangForPod(ctxT, root, podT("p", "role=worker", "group=1"))
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.plans[strings.Index(tc.plans, "x")+1:]; fmt.Sprint(g.MinMember) != want {
				t.Errorf("GangForPod MinMember %d, want %s", g.MinMember, want)
			}
		})
	}
}

// A gang member needs only to name a component: one without pods anywhere
// below it is valid, as in Workload Map, and adds nobody to the gang.
func TestGangMemberWithoutPods(t *testing.T) {
	c := compileT(t, `
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: logical}
spec:
  structureDefinition:
    rootComponent:
      name: app
      kind: {group: example.com, version: v1, kind: App}
    childComponents:
      - {name: logical, ownerRef: app}
      - name: pods
        ownerRef: app
        specDefinition: {podTemplateSpecPath: .spec.template}
        scaleDefinition: {replicasPath: .spec.count}
  optimizationInstructions:
    gangScheduling:
      podGroups: [{name: g, members: [{componentName: logical}, {componentName: pods}]}]
`)
	plans, err := c.GangPlans(ctxT, objT(t, "apiVersion: example.com/v1\nkind: App\nmetadata: {name: a}\nspec: {count: 3, template: {spec: {containers: [{name: c}]}}}"))
	if err != nil {
		t.Fatal(err)
	}
	if len(plans) != 1 || plans[0].MinMember != 3 {
		t.Errorf("plans %+v, want one gang of 3", plans)
	}
}
