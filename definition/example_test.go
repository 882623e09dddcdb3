package definition_test

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/muster-io/muster/definition"
)

func ExampleCompile() {
	k, err := definition.Decode([]byte(`
apiVersion: run.ai/v1alpha1
kind: Karta
metadata: {name: batch}
spec:
  structureDefinition:
    rootComponent:
      name: batch
      kind: {group: example.com, version: v1, kind: Batch}
    childComponents:
      - name: role
        ownerRef: batch
        instanceIdPath: '.spec.roles[].name'
        specDefinition: {podTemplateSpecPath: '.spec.roles[].template'}
        scaleDefinition: {replicasPath: '.spec.roles[].replicas'}
        podSelector:
          componentTypeSelector: {keyPath: '.metadata.labels["example.com/batch"]'}
          componentInstanceSelector: {idPath: '.metadata.labels["example.com/role"]'}
  optimizationInstructions:
    gangScheduling:
      podGroups: [{name: all, members: [{componentName: role}]}]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := definition.Compile(k, definition.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	root := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "example.com/v1", "kind": "Batch",
		"metadata": map[string]any{"name": "b1", "namespace": "default"},
		"spec": map[string]any{"roles": []any{
			map[string]any{"name": "driver", "replicas": int64(1), "template": tpl("1")},
			map[string]any{"name": "executor", "replicas": int64(4), "template": tpl("2")},
		}},
	}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b1-executor-0", Namespace: "default",
		Labels: map[string]string{"example.com/batch": "b1", "example.com/role": "executor"}}}
	g, err := c.GangForPod(context.Background(), root, pod)
	if err != nil {
		fmt.Println(err)
		return
	}
	gpus := definition.GPUs(g.MinResources, definition.DefaultGPUResourceNames)
	fmt.Printf("gang %s: min-member %d, %d GPUs\n", g.Definition, g.MinMember, gpus)
	// Output: gang all: min-member 5, 9 GPUs
}

func tpl(gpus string) map[string]any {
	return map[string]any{"spec": map[string]any{"containers": []any{map[string]any{
		"name": "main", "resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": gpus}},
	}}}}
}
