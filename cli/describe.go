package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/muster-io/muster/api"
	"github.com/muster-io/muster/definition"
)

// podGroupGVR is the scheduler-plugins PodGroup the pod-grouper writes.
var (
	podGroupGVR = schema.GroupVersionResource{Group: "scheduling.x-k8s.io", Version: "v1alpha1", Resource: "podgroups"}
	podGroupGK  = schema.GroupKind{Group: "scheduling.x-k8s.io", Kind: "PodGroup"}
)

const describeLong = `Show a workload as its components (roles), their instances and pods.

For each pod: ready or not (and why not), node and GPUs. For each gang: the
PodGroup, its min-member, how many members are bound, its priority (as the
pod-grouper records it), for an elastic gang (more members than min-member) the
quorum and the extras apart ("quorum 2/2 bound, extras 1/3 bound"), its phase,
and when it is pending what the scheduler says. A resources table sums replicas,
GPUs, CPU and memory per component.

TYPE is what kubectl accepts: kind, plural, short name (where the CRD defines
one) or kind.group (jobset, jobsets, jobset.jobset.x-k8s.io). muster finds the
definition for the kind in the cluster's Karta objects, then in its embedded
catalog.

With -f the view is built offline from a manifest: the tree from the spec alone
and the gangs the pod-grouper would create. --definition tries a definition you
are writing instead of the catalog's; --pods attributes sample pods (and the
objects between them and the workload, such as Jobs) to components and gangs.`

const describeExample = `  # A live workload, by type and name
  muster describe jobset/trainer -n team-a
  muster describe jobset trainer -n team-a

  # Show every pod, not only the first 20 per component
  muster describe rayclusters/chat --pod-limit 0

  # Many components: at most 3 under each parent, unready or missing pods first
  muster describe jobset/trainer --component-limit 3

  # Offline: the tree and gang plan of a manifest, from a file or stdin
  muster describe -f trainer.yaml
  helm template ./chart | muster describe -f -

  # Try a definition you are writing on a sample object and sample pods
  muster describe -f sample.yaml --definition my-def.yaml --pods sample-pods.yaml -o json`

// DescribeOptions are the options of "muster describe".
type DescribeOptions struct {
	env *Env

	Filename   string
	Definition string
	PodFiles   []string
	PodLimit   int
	// ComponentLimit caps the components shown under each parent in the
	// table (0 shows all).
	ComponentLimit int
	Output         string
	Namespace      string
	PodSelector    string

	typeArg, nameArg string

	genericiooptions.IOStreams
}

// NewCmdDescribe returns the describe command.
func NewCmdDescribe(env *Env) *cobra.Command {
	o := &DescribeOptions{env: env, PodLimit: 20, Output: "table", IOStreams: env.Streams}
	cmd := &cobra.Command{
		Use:                   "describe (TYPE/NAME | TYPE NAME | -f FILE | -f -) [--pod-limit N] [--component-limit N] [-o table|wide|json|yaml]",
		DisableFlagsInUseLine: true,
		Short:                 "Show a workload's roles, pods, GPUs, nodes and gangs",
		Long:                  describeLong,
		Example:               describeExample,
		ValidArgsFunction:     completeTypeAndName(env),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(cmd, args); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.Filename, "filename", "f", "", "Describe the workload(s) in this manifest offline (\"-\" for stdin)")
	f.StringVar(&o.Definition, "definition", "", "With -f: use this definition file instead of the catalog's")
	f.StringArrayVar(&o.PodFiles, "pods", nil, "With -f: sample pods (multi-document YAML; Jobs and other intermediate owners may be included) to attribute to components and gangs; repeatable")
	f.IntVar(&o.PodLimit, "pod-limit", o.PodLimit, "Pods shown per component, unhealthy first (0 = all)")
	f.IntVar(&o.ComponentLimit, "component-limit", 0, "Components shown under each parent in the tree, those with unready or missing pods first (0 = all); table output only")
	addOutputFlag(cmd, &o.Output)
	return cmd
}

// Complete fills the options from the arguments.
func (o *DescribeOptions) Complete(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 1 && strings.Contains(args[0], "/"):
		parts := strings.SplitN(args[0], "/", 2)
		o.typeArg, o.nameArg = parts[0], parts[1]
	case len(args) == 1:
		o.typeArg = args[0]
	case len(args) == 2:
		o.typeArg, o.nameArg = args[0], args[1]
	case len(args) > 2:
		return usageErrorf("describe takes TYPE/NAME or TYPE NAME, got %d arguments", len(args))
	}
	o.Namespace = *o.env.ConfigFlags.Namespace
	return nil
}

// Validate checks the combination of arguments and flags.
func (o *DescribeOptions) Validate() error {
	if err := validateOutput(o.Output); err != nil {
		return err
	}
	if o.PodLimit < 0 {
		return usageErrorf("--pod-limit must be 0 (all) or more, not %d", o.PodLimit)
	}
	if o.ComponentLimit < 0 {
		return usageErrorf("--component-limit must be 0 (all) or more, not %d", o.ComponentLimit)
	}
	if o.Filename != "" {
		if o.typeArg != "" {
			return usageErrorf("give either -f FILE or TYPE/NAME, not both")
		}
		return nil
	}
	if o.Definition != "" || len(o.PodFiles) > 0 {
		return usageErrorf("--definition and --pods work with -f FILE only")
	}
	if o.typeArg == "" {
		return usageErrorf("describe needs TYPE/NAME, TYPE NAME or -f FILE (see \"muster describe --help\")")
	}
	if o.nameArg == "" {
		return usageErrorf("describe needs a name: %s/NAME or %s NAME", o.typeArg, o.typeArg)
	}
	return nil
}

// Run describes the workload.
func (o *DescribeOptions) Run(ctx context.Context) error {
	return reportNoDefinition(o.Out, o.Output, o.typeArg, o.run(ctx))
}

func (o *DescribeOptions) run(ctx context.Context) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := withTimeout(ctx)
	defer cancel()
	var descs []*Description
	var err error
	if o.Filename != "" {
		descs, err = o.runOffline(ctx)
	} else {
		var d *Description
		d, err = o.runLive(ctx)
		descs = []*Description{d}
	}
	if err != nil {
		return err
	}
	return o.print(descs)
}

func (o *DescribeOptions) print(descs []*Description) error {
	switch o.Output {
	case "json", "yaml":
		if len(descs) == 1 {
			return printData(o.Out, o.Output, descs[0])
		}
		return printData(o.Out, o.Output, struct {
			Items []*Description `json:"items"`
		}{descs})
	}
	p := newPainter(o.env, o.Out)
	for i, d := range descs {
		if i > 0 {
			fmt.Fprintln(o.Out)
		}
		if err := renderDescription(o.Out, p, d, o.Output == "wide", o.ComponentLimit); err != nil {
			return err
		}
	}
	return nil
}

// runLive reads the workload, its pods, PodGroups and scheduling events.
//
// The requests that do not need an earlier answer run at once: the pods,
// PodGroups and events of the namespace are listed while the definitions
// load and the workload is fetched, and the owners the pods may pass
// through (the definition's child kinds) are listed as soon as the
// definition is known. Errors are still reported in the order a one-by-one
// run meets them: definitions, type, definition for the kind, the
// workload, its pods.
func (o *DescribeOptions) runLive(ctx context.Context) (*Description, error) {
	c, err := o.env.Cluster()
	if err != nil {
		return nil, err
	}
	// Cancel what is still in flight when an error ends the run early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pending := o.env.startDefinitions(ctx, c)
	ns := o.Namespace
	if ns == "" {
		ns = c.Namespace
	}
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	rt, rtErr := resolveType(c.Mapper, o.typeArg)
	var f *liveFetch
	if rtErr == nil {
		f = startLiveFetch(ctx, c, rt.Mapping, ns, o.nameArg)
	}

	defs, err := pending.wait()
	if err != nil {
		return nil, err
	}
	if rtErr != nil {
		if isUnreachable(rtErr) {
			return nil, apiError("discover types", rtErr)
		}
		full, err := defs.full()
		if err != nil {
			return nil, err
		}
		return nil, unknownTypeError(o.typeArg, full, c)
	}
	ent, err := defs.forGVK(rt.GVK)
	if err != nil {
		return nil, err
	}
	if f.namespaced {
		f.owners.prefetch(ctx, ns, childKinds(ent.Compiled.Definition()))
	}

	root, err := f.waitRoot(rt, o.nameArg, ns)
	if err != nil {
		return nil, err
	}
	in := describeInput{
		Root:     root,
		Def:      defRef{Name: ent.Name, Origin: string(ent.Origin), Source: ent.Source},
		Compiled: ent.Compiled,
		Live:     true,
		Now:      o.env.Now(),
		PodLimit: o.PodLimit,
		GPUNames: o.env.gpuNames(),
	}
	var warnings []string
	if root.GetNamespace() != "" {
		f.wg.Wait()
		if f.podsErr != nil {
			return nil, apiError("list pods in "+root.GetNamespace(), f.podsErr)
		}
		in.Pods, err = workloadPods(ctx, f.owners, root, f.pods)
		if err != nil {
			return nil, err
		}
		if f.podGroupsErr != nil {
			warnings = append(warnings, f.podGroupsErr.Error())
		} else {
			in.PodGroups = workloadPodGroups(root, f.podGroups, in.Pods)
			in.GangPods = podsByPodGroup(f.pods, in.PodGroups)
		}
		in.SchedulingEvents, err = f.events, f.eventsErr
		if err != nil {
			warnings = append(warnings, err.Error())
		}
	}
	ctx, refWarnings := liveRefs(c).bind(ctx, ent.Compiled, root)
	d, err := buildDescription(ctx, in)
	if err != nil {
		return nil, err
	}
	d.Warnings = append(d.Warnings, warnings...)
	d.Warnings = append(d.Warnings, refWarnings...)
	return d, nil
}

// liveFetch is the requests of one live describe in flight. Each result
// is read only after its done channel closes (rootDone) or wg.Wait returns
// (the namespace lists).
type liveFetch struct {
	rootDone chan struct{}
	root     *unstructured.Unstructured
	rootErr  error

	// namespaced says whether the namespace lists were started: a
	// cluster-scoped workload has no pods of its own namespace.
	namespaced   bool
	wg           sync.WaitGroup
	pods         []corev1.Pod
	podsErr      error
	podGroups    []unstructured.Unstructured
	podGroupsErr error
	events       map[string]string
	eventsErr    error

	owners *ownerIndex
}

// startLiveFetch starts fetching the workload and, for a namespaced kind,
// listing the pods, PodGroups and scheduling events of its namespace.
// waitRoot waits for the workload object and says, as the CLI does, why it
// could not be read.
func (f *liveFetch) waitRoot(rt *resolvedType, name, ns string) (*unstructured.Unstructured, error) {
	<-f.rootDone
	if err := f.rootErr; err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFoundErrorf("%s %q not found in namespace %q (try \"muster get %s -A\")", rt.Mapping.Resource.Resource, name, ns, strings.ToLower(rt.GVK.Kind))
		}
		return nil, apiError(fmt.Sprintf("get %s %s", rt.Mapping.Resource.Resource, name), err)
	}
	return f.root, nil
}

func startLiveFetch(ctx context.Context, c *Cluster, m *meta.RESTMapping, ns, name string) *liveFetch {
	f := &liveFetch{rootDone: make(chan struct{}), owners: newOwnerIndex(c)}
	f.namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
	go func() {
		defer close(f.rootDone)
		ri := c.Dynamic.Resource(m.Resource)
		if f.namespaced {
			f.root, f.rootErr = ri.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		} else {
			f.root, f.rootErr = ri.Get(ctx, name, metav1.GetOptions{})
		}
	}()
	if !f.namespaced {
		return f
	}
	f.wg.Add(3)
	go func() {
		defer f.wg.Done()
		// resourceVersion 0: the API server's cache is as fresh as a
		// person needs and spares etcd a read of every pod.
		list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			f.podsErr = err
			return
		}
		f.pods = list.Items
	}()
	go func() {
		defer f.wg.Done()
		f.podGroups, f.podGroupsErr = listPodGroups(ctx, c, ns)
	}()
	go func() {
		defer f.wg.Done()
		f.events, f.eventsErr = schedulingEvents(ctx, c, ns)
	}()
	return f
}

// podsByPodGroup maps each PodGroup of pgs to the pods of the namespace
// labelled with it.
func podsByPodGroup(pods []corev1.Pod, pgs map[string]*podGroupInfo) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for i := range pods {
		if n := pods[i].Labels[api.LabelPodGroup]; n != "" && pgs[n] != nil {
			out[n] = append(out[n], &pods[i])
		}
	}
	return out
}

// isPod says whether obj is a core v1 Pod.
func isPod(obj *unstructured.Unstructured) bool {
	gvk := obj.GroupVersionKind()
	return gvk.Group == "" && gvk.Kind == "Pod"
}

// workloadPods keeps the pods whose controller owner chain reaches root. A
// pod described as a workload of its own is its only pod: pods it owns
// (through an object it controls, as a leader pod owns its workers' set)
// are components of the workload above it, not of this view.
func workloadPods(ctx context.Context, owners *ownerIndex, root *unstructured.Unstructured, pods []corev1.Pod) ([]*corev1.Pod, error) {
	if isPod(root) {
		for i := range pods {
			if pods[i].UID == root.GetUID() {
				return []*corev1.Pod{&pods[i]}, nil
			}
		}
		// Listed from the server's cache, a pod just created may be
		// missing there; the object itself was read.
		p := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(root.Object, p); err != nil {
			return nil, fmt.Errorf("pod %s: %v", root.GetName(), err)
		}
		return []*corev1.Pod{p}, nil
	}
	w := newOwnerWalker(owners.lookup)
	for i := range pods {
		w.remember(&pods[i])
	}
	w.remember(root)
	var out []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		ok, err := w.reaches(ctx, p, root.GetUID())
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// listPodGroups lists the PodGroups of ns; a cluster without the PodGroup
// CRD has none.
func listPodGroups(ctx context.Context, c *Cluster, ns string) ([]unstructured.Unstructured, error) {
	if _, err := c.Mapper.RESTMapping(podGroupGK, podGroupGVR.Version); err != nil {
		return nil, nil
	}
	list, err := c.Dynamic.Resource(podGroupGVR).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PodGroups: %v", err)
	}
	return list.Items, nil
}

// workloadPodGroups keeps the PodGroups of root: those labelled with its
// name and kind or owned by it, and those its pods are labelled with.
func workloadPodGroups(root *unstructured.Unstructured, pgs []unstructured.Unstructured, pods []*corev1.Pod) map[string]*podGroupInfo {
	labelled := map[string]bool{}
	for _, p := range pods {
		if n := p.Labels[api.LabelPodGroup]; n != "" {
			labelled[n] = true
		}
	}
	out := map[string]*podGroupInfo{}
	for i := range pgs {
		pg := &pgs[i]
		mine := labelled[pg.GetName()] ||
			(pg.GetLabels()[api.LabelWorkloadName] == root.GetName() && pg.GetLabels()[api.LabelWorkloadKind] == root.GetKind())
		for _, r := range pg.GetOwnerReferences() {
			if r.UID == root.GetUID() {
				mine = true
			}
		}
		if mine {
			out[pg.GetName()] = podGroupFrom(pg)
		}
	}
	return out
}

func podGroupFrom(pg *unstructured.Unstructured) *podGroupInfo {
	info := &podGroupInfo{Name: pg.GetName()}
	if v, ok, _ := unstructured.NestedInt64(pg.Object, "spec", "minMember"); ok {
		info.MinMember = int32(v)
	}
	if rl, ok, _ := unstructured.NestedMap(pg.Object, "spec", "minResources"); ok {
		info.MinResources = map[string]string{}
		for k, v := range rl {
			info.MinResources[k] = fmt.Sprint(v)
		}
	}
	info.Phase, _, _ = unstructured.NestedString(pg.Object, "status", "phase")
	if prio, ok := api.PodGroupPriority(pg.GetAnnotations()); ok {
		info.Priority = &prio
		info.PriorityClass = pg.GetAnnotations()[api.AnnotationPriorityClass]
	}
	return info
}

// schedulingEvents maps "Pod/<name>" and "PodGroup/<name>" to the message
// of their latest FailedScheduling event in ns.
func schedulingEvents(ctx context.Context, c *Cluster, ns string) (map[string]string, error) {
	list, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		return nil, fmt.Errorf("list scheduling events: %v", err)
	}
	type latest struct {
		at  metav1.Time
		msg string
	}
	best := map[string]latest{}
	for _, ev := range list.Items {
		at := ev.LastTimestamp
		if at.IsZero() {
			at = metav1.Time{Time: ev.EventTime.Time}
		}
		if at.IsZero() {
			at = ev.CreationTimestamp
		}
		k := ev.InvolvedObject.Kind + "/" + ev.InvolvedObject.Name
		if cur, ok := best[k]; !ok || cur.at.Before(&at) {
			best[k] = latest{at: at, msg: oneLine(ev.Message)}
		}
	}
	out := make(map[string]string, len(best))
	for k, v := range best {
		out[k] = v.msg
	}
	return out, nil
}

// runOffline describes every workload of the manifest without a cluster.
func (o *DescribeOptions) runOffline(ctx context.Context) ([]*Description, error) {
	data, err := o.env.readInput(o.Filename)
	if err != nil {
		return nil, err
	}
	objs, err := decodeObjects(o.Filename, data, false)
	if err != nil {
		return nil, err
	}
	var extra []*unstructured.Unstructured
	for _, f := range o.PodFiles {
		data, err := o.env.readInput(f)
		if err != nil {
			return nil, err
		}
		more, err := decodeObjects(f, data, true)
		if err != nil {
			return nil, err
		}
		extra = append(extra, more...)
	}

	var own *definition.Compiled
	var ownRef defRef
	if o.Definition != "" {
		own, ownRef, err = o.compileDefinitionFile(o.Definition)
		if err != nil {
			return nil, err
		}
	}
	var defs *definitions
	if own == nil {
		if defs, err = o.env.loadDefinitions(ctx, nil); err != nil {
			return nil, err
		}
	}

	// The workloads are the objects of -f that a definition describes;
	// everything else (in -f or --pods) is a pod or an intermediate owner.
	var roots []*unstructured.Unstructured
	var comps []*definition.Compiled
	var refs []defRef
	var others []*unstructured.Unstructured
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		switch {
		case own != nil && own.RootGVK().GroupKind() == gvk.GroupKind():
			roots, comps, refs = append(roots, obj), append(comps, own), append(refs, ownRef)
		case own == nil && gvk.Kind != "Pod":
			ent, err := defs.forGVK(gvk)
			if err != nil {
				others = append(others, obj)
				continue
			}
			roots, comps = append(roots, obj), append(comps, ent.Compiled)
			refs = append(refs, defRef{Name: ent.Name, Origin: string(ent.Origin), Source: ent.Source})
		default:
			others = append(others, obj)
		}
	}
	if len(roots) == 0 {
		if own != nil {
			return nil, noDefinitionErrorf("%s: no object of kind %s (the root of %s)", o.Filename, own.RootGVK().Kind, ownRef.Name)
		}
		var kinds []string
		for _, obj := range objs {
			kinds = append(kinds, obj.GetKind())
		}
		if len(objs) == 1 && objs[0].GetKind() == "Pod" {
			// A lone pod is a workload too when the catalog defines Pod.
			if ent, err := defs.forGVK(objs[0].GroupVersionKind()); err == nil {
				roots, comps = objs, []*definition.Compiled{ent.Compiled}
				refs = []defRef{{Name: ent.Name, Origin: string(ent.Origin), Source: ent.Source}}
				others = nil
			}
		}
		if len(roots) == 0 {
			_, err := defs.forGVK(objs[0].GroupVersionKind())
			return nil, withCode(ExitNoDefinition, fmt.Errorf("%s: no workload with a definition among %s: %v", o.Filename, strings.Join(kinds, ", "), err))
		}
	}
	others = append(others, extra...)

	// Index pods and owners; a pod belongs to the workload its owner chain
	// reaches, or to the only workload when the chain cannot be followed.
	byUID := map[types.UID]metav1.Object{}
	var pods []*corev1.Pod
	for _, obj := range others {
		byUID[obj.GetUID()] = obj
		if obj.GetKind() == "Pod" && obj.GroupVersionKind().Group == "" {
			p, err := toPod(obj)
			if err != nil {
				return nil, err
			}
			pods = append(pods, p)
		}
	}
	for _, r := range roots {
		byUID[r.GetUID()] = r
	}
	w := newOwnerWalker(func(_ context.Context, _ string, ref metav1.OwnerReference) (metav1.Object, error) {
		return byUID[ref.UID], nil
	})
	// A referenced object (a TrainJob's runtime) may be in any of the files.
	docRefs := offlineRefs(append(append([]*unstructured.Unstructured(nil), objs...), extra...))
	var out []*Description
	for i, root := range roots {
		var mine []*corev1.Pod
		for _, p := range pods {
			ok := false
			if root.GetUID() != "" {
				ok, _ = w.reaches(ctx, p, root.GetUID())
			}
			if ok || len(roots) == 1 {
				mine = append(mine, p)
			}
		}
		rctx, refWarnings := docRefs.bind(ctx, comps[i], root)
		d, err := buildDescription(rctx, describeInput{
			Root: root, Def: refs[i], Compiled: comps[i], Pods: mine,
			Now: o.env.Now(), PodLimit: o.PodLimit, GPUNames: o.env.gpuNames(),
		})
		if err != nil {
			return nil, err
		}
		d.Warnings = append(d.Warnings, refWarnings...)
		out = append(out, d)
	}
	return out, nil
}

// compileDefinitionFile reads one definition for --definition.
func (o *DescribeOptions) compileDefinitionFile(name string) (*definition.Compiled, defRef, error) {
	data, err := o.env.readInput(name)
	if err != nil {
		return nil, defRef{}, err
	}
	kartas, err := definition.DecodeAll(data)
	if err != nil {
		return nil, defRef{}, invalidErrorf("%s: %v", name, err)
	}
	if len(kartas) != 1 {
		return nil, defRef{}, usageErrorf("%s: --definition takes one definition, found %d", name, len(kartas))
	}
	if definition.IsLegacy(kartas[0]) {
		o.env.warnf("%s: %s", name, definition.LegacyNotice(kartas[0].Name))
	}
	c, err := definition.Compile(kartas[0], o.env.definitionOptions())
	if err != nil {
		return nil, defRef{}, invalidErrorf("%s: %s (run \"muster validate %s\" for every problem)", name, validationSummary(err), name)
	}
	return c, defRef{Name: kartas[0].Name, Origin: "file", Source: name}, nil
}

// unknownTypeError says a type is unknown and suggests the nearest known
// spelling.
func unknownTypeError(arg string, defs *definitions, c *Cluster) error {
	cands := defs.typeCandidates(c.Mapper, shortNames(c))
	msg := fmt.Sprintf("the cluster has no resource type %q", arg)
	if s := suggest(arg, cands); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	} else {
		msg += fmt.Sprintf(" (defined types: %s)", strings.Join(defs.kindNames(), ", "))
	}
	return notFoundErrorf("%s", msg)
}

// shortNames reads the short names of served resources from discovery
// (cached on disk by cli-runtime). Failures leave them out: they only
// improve suggestions.
func shortNames(c *Cluster) map[schema.GroupResource][]string {
	out := map[schema.GroupResource][]string{}
	if c.Discovery == nil {
		return out
	}
	lists, _ := c.Discovery.ServerPreferredResources()
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if len(r.ShortNames) > 0 {
				out[schema.GroupResource{Group: gv.Group, Resource: r.Name}] = r.ShortNames
			}
		}
	}
	return out
}

// decodeObjects splits a multi-document YAML or JSON stream into objects,
// naming the file and document on error. Every object must say what it is
// (apiVersion, kind) and which one (metadata.name): the workload and its
// pods are matched by those.
func decodeObjects(name string, data []byte, allowEmpty bool) ([]*unstructured.Unstructured, error) {
	if name == "-" {
		name = "standard input"
	}
	docs, err := splitDocuments(data)
	if err != nil {
		return nil, usageErrorf("%s: %s", name, strings.Replace(err.Error(), "error converting YAML to JSON: ", "", 1))
	}
	var out []*unstructured.Unstructured
	for i, doc := range docs {
		where := fmt.Sprintf("%s: document %d", name, i+1)
		var m map[string]any
		if err := json.Unmarshal(doc, &m); err != nil {
			var v any
			if json.Unmarshal(doc, &v) == nil {
				return nil, usageErrorf("%s is %s, want a Kubernetes object (apiVersion, kind, metadata.name)", where, describeJSONValue(v))
			}
			return nil, usageErrorf("%s: %v", where, err)
		}
		obj := &unstructured.Unstructured{Object: m}
		if it, has := m["items"]; has && strings.HasSuffix(obj.GetKind(), "List") {
			items, ok := it.([]any)
			if !ok {
				return nil, usageErrorf("%s: a %s whose items is not a list", where, obj.GetKind())
			}
			for j, it := range items {
				im, ok := it.(map[string]any)
				if !ok {
					return nil, usageErrorf("%s: items[%d] is %s, want a Kubernetes object", where, j, describeJSONValue(it))
				}
				item := &unstructured.Unstructured{Object: im}
				if err := checkObject(item); err != nil {
					return nil, usageErrorf("%s: items[%d]: %v", where, j, err)
				}
				out = append(out, item)
			}
			continue
		}
		if err := checkObject(obj); err != nil {
			return nil, usageErrorf("%s: %v", where, err)
		}
		out = append(out, obj)
	}
	if len(out) == 0 && !allowEmpty {
		return nil, usageErrorf("%s: no objects in the file", name)
	}
	return out, nil
}

// checkObject says what identifying field an object lacks.
func checkObject(obj *unstructured.Unstructured) error {
	var missing []string
	if obj.GetAPIVersion() == "" {
		missing = append(missing, "apiVersion")
	}
	if obj.GetKind() == "" {
		missing = append(missing, "kind")
	}
	if obj.GetName() == "" && obj.GetGenerateName() == "" {
		missing = append(missing, "metadata.name")
	}
	if len(missing) == 0 {
		return nil
	}
	what := "the object"
	if k := obj.GetKind(); k != "" {
		what = "the " + k
	}
	return fmt.Errorf("%s has no %s", what, strings.Join(missing, ", no "))
}

// describeJSONValue names a JSON value's type for a person.
func describeJSONValue(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64, json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "not an object"
}

func toPod(obj *unstructured.Unstructured) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	dec := jsonStrictDecoder(bytes.NewReader(data))
	if err := dec.Decode(p); err != nil {
		return nil, usageErrorf("pod %s: %v", obj.GetName(), err)
	}
	return p, nil
}
