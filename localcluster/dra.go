package localcluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// DRAGPUDriver is the driver and DeviceClass name of fake GPUs published
// through DRA, the names NVIDIA's DRA driver uses.
const DRAGPUDriver = "gpu.nvidia.com"

// DRA GPU attributes the fake driver publishes, in the driver's domain
// (CEL reads them as device.attributes["gpu.nvidia.com"].productName).
const (
	DRAAttrProduct = "productName"
	DRAAttrIndex   = "index"
	DRAAttrClique  = "clique"
	DRACapMemory   = "memory"
)

// DRAGPUs describes the fake GPUs of one node published as a ResourceSlice.
type DRAGPUs struct {
	// PerNode is the number of devices of each node.
	PerNode int
	// Product is the productName attribute; default "NVIDIA H100 80GB HBM3".
	Product string
	// Memory is each device's memory capacity; default 80Gi.
	Memory string
	// CliqueLabel is the node label whose value is the NVLink clique
	// attribute of the node's devices; default the rack label.
	CliqueLabel string
}

// GPUDeviceClass is the DeviceClass of the fake GPUs. With extended set,
// it also maps the extended resource nvidia.com/gpu to its devices
// (DRA-backed extended resources): pods asking for nvidia.com/gpu get
// devices on nodes that publish no such resource.
func GPUDeviceClass(extended bool) *resourcev1.DeviceClass {
	dc := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: DRAGPUDriver},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", DRAGPUDriver)},
		}}},
	}
	if extended {
		dc.Spec.ExtendedResourceName = ptr.To(DefaultGPUResource)
	}
	return dc
}

// EnsureGPUDeviceClass creates GPUDeviceClass(extended), or updates the
// class to it when one exists.
func (cp *ControlPlane) EnsureGPUDeviceClass(ctx context.Context, extended bool) error {
	want := GPUDeviceClass(extended)
	got, err := cp.Client.ResourceV1().DeviceClasses().Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		_, err = cp.Client.ResourceV1().DeviceClasses().Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		got.Spec = want.Spec
		_, err = cp.Client.ResourceV1().DeviceClasses().Update(ctx, got, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("DeviceClass %s: %w", want.Name, err)
	}
	return nil
}

// GPUSlice is the ResourceSlice of node's fake GPUs: one pool per node,
// named after it.
func GPUSlice(node *corev1.Node, g DRAGPUs) (*resourcev1.ResourceSlice, error) {
	if g.Product == "" {
		g.Product = "NVIDIA H100 80GB HBM3"
	}
	if g.Memory == "" {
		g.Memory = "80Gi"
	}
	if g.CliqueLabel == "" {
		g.CliqueLabel = RackLabel
	}
	mem, err := resource.ParseQuantity(g.Memory)
	if err != nil {
		return nil, fmt.Errorf("GPU memory %q: %w", g.Memory, err)
	}
	clique := node.Labels[g.CliqueLabel]
	if clique == "" {
		clique = node.Name
	}
	devices := make([]resourcev1.Device, g.PerNode)
	for i := range devices {
		devices[i] = resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				DRAAttrProduct: {StringValue: ptr.To(g.Product)},
				DRAAttrIndex:   {IntValue: ptr.To(int64(i))},
				DRAAttrClique:  {StringValue: ptr.To(clique)},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				DRACapMemory: {Value: mem},
			},
		}
	}
	var labels map[string]string
	if pool := node.Labels[PoolLabel]; pool != "" {
		labels = map[string]string{PoolLabel: pool}
	}
	return &resourcev1.ResourceSlice{
		// The pool label lets a test delete its nodes' slices at once.
		ObjectMeta: metav1.ObjectMeta{Name: node.Name + "-" + DRAGPUDriver, Labels: labels},
		Spec: resourcev1.ResourceSliceSpec{
			Driver:   DRAGPUDriver,
			NodeName: ptr.To(node.Name),
			Pool:     resourcev1.ResourcePool{Name: node.Name, Generation: 1, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}, nil
}

// PublishGPUs creates the ResourceSlice of each node's fake GPUs, as a DRA
// driver's kubelet plugin would.
func (cp *ControlPlane) PublishGPUs(ctx context.Context, nodes []*corev1.Node, g DRAGPUs) error {
	for _, n := range nodes {
		s, err := GPUSlice(n, g)
		if err != nil {
			return err
		}
		if _, err := cp.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("ResourceSlice of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// DeleteGPUSlices deletes the fake GPU slices of the nodes.
func (cp *ControlPlane) DeleteGPUSlices(ctx context.Context, nodes []*corev1.Node) error {
	for _, n := range nodes {
		err := cp.Client.ResourceV1().ResourceSlices().Delete(ctx, n.Name+"-"+DRAGPUDriver, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("ResourceSlice of node %s: %w", n.Name, err)
		}
	}
	return nil
}

// GPUClaimTemplate asks for count devices of the fake GPUs' class, one
// claim per pod that names it.
func GPUClaimTemplate(name string, count int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{
			Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "gpus",
				Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: DRAGPUDriver, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
				},
			}}},
		}},
	}
}

// Fake multi-node NVLink domains (NVIDIA's ComputeDomains): one channel
// device per clique, reachable from every node of the clique, that the
// members of a job share through one ResourceClaim.
const (
	ChannelDriver = "compute-domain.nvidia.com"
	ChannelClass  = "compute-domain-default-channel.nvidia.com"
)

// ChannelDeviceClass is the DeviceClass of the clique channels.
func ChannelDeviceClass() *resourcev1.DeviceClass {
	return &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: ChannelClass},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", ChannelDriver)},
		}}},
	}
}

// PublishChannels creates one ResourceSlice per value of the nodes' label
// cliqueLabel, holding one channel device that the nodes of that value
// reach, and returns the slices' names.
func (cp *ControlPlane) PublishChannels(ctx context.Context, nodes []*corev1.Node, cliqueLabel string) ([]string, error) {
	seen := map[string]bool{}
	var names []string
	for _, n := range nodes {
		clique := n.Labels[cliqueLabel]
		if clique == "" || seen[clique] {
			continue
		}
		seen[clique] = true
		s := &resourcev1.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: "channel-" + clique},
			Spec: resourcev1.ResourceSliceSpec{
				Driver: ChannelDriver,
				Pool:   resourcev1.ResourcePool{Name: "clique-" + clique, Generation: 1, ResourceSliceCount: 1},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchExpressions: []corev1.NodeSelectorRequirement{{Key: cliqueLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{clique}}},
				}}},
				Devices: []resourcev1.Device{{
					Name:       "channel-0",
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{DRAAttrClique: {StringValue: ptr.To(clique)}},
				}},
			},
		}
		if _, err := cp.Client.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return names, fmt.Errorf("channel slice of clique %s: %w", clique, err)
		}
		names = append(names, s.Name)
	}
	return names, nil
}
