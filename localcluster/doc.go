// Package localcluster runs a real Kubernetes control plane inside the current
// process: embedded etcd, kube-apiserver, the pod-creating controllers of
// kube-controller-manager, fake nodes, a pod-status simulator that plays
// kubelet, and kube-scheduler instances with any profile.
//
// It serves the integration tests under test/ and the sandbox
// (cmd/muster-sandbox). Nothing here needs a *testing.T, so one control plane
// can be shared by a whole test binary from TestMain:
//
//	cp, err := localcluster.Start(localcluster.Options{})
//	...
//	defer cp.Stop()
//	err = cp.InstallCRDFile(ctx, "crd.yaml")        // CRDs first (see InstallCRD)
//	_, err = cp.StartControllers(ctx)               // Job, ReplicaSet, Deployment, StatefulSet, CronJob, ResourceClaim, GC (+ PodGroup protection)
//	sim, err := cp.StartPodSimulator(ctx, localcluster.PodSimulatorOptions{})
//	_, err = localcluster.StartScheduler(ctx, cp, localcluster.SchedulerOptions{}) // default profile
//	_, err = cp.CreateNodes(ctx, 4, localcluster.GPUNodes("gpu", 8, localcluster.Topology{Nodes: 4, Zones: 2}))
//	_, err = cp.Apply(ctx, yamlDocs, ns)
//	pods, err := cp.WaitPodsRunning(ctx, ns, "app=web", 3, localcluster.ShortTimeout)
//
// Every start helper registers its stop with the control plane, so Stop
// tears everything down (last started first) even if the caller forgets.
//
// The real operators (see localcluster/operators/) run as child processes,
// each built from the module in localcluster/operators/<name> and described
// by the operator.yaml beside it (module, CRDs, webhooks, command line): see
// InstallOperatorCRDs and StartOperator, with the operators package
// (localcluster/operators: Names, Build) that describes and builds them.
//
// Native gangs: Options.NativePodGroups turns on the GenericWorkload gate and
// serves scheduling.k8s.io/v1beta1, so StartScheduler's default profile
// gang-schedules native PodGroups (pods with spec.schedulingGroup) and
// StartControllers adds the PodGroup protection controller that finishes
// their deletion. Options.WorkloadWithJob (alpha) also lets the Job
// controller create a Workload and PodGroup per root Job. Gates are
// process-global; gates.go says how they are set and restored.
// ApplyMutatingWebhook registers a webhook served on loopback by URL (with
// LoopbackServingCert for its certificate), as a pod-mutating webhook under
// test needs.
//
// Fault tests: with Options.Restartable, RestartAPIServer stops the
// kube-apiserver and starts a new one on the same etcd; clients reach it
// through a loopback proxy with a fixed address, certificate and token, so
// every client (and the kubeconfig file) keeps working across the restart.
// The sandbox and most tests run without it. StartNamespaceController runs
// the namespace controller (the sandbox does; the tests leave namespaces
// behind for the shared control plane to stop with).
//
// Tests isolate themselves with NewNamespace and, when they need nodes of their
// own, with node pools (NodeSpec.Pool): pool nodes carry a label and a taint so
// that only pods that ask for the pool land there.
//
// Logging: klog, etcd and the apiserver are silenced by default (their output
// goes to Options.LogOutput or is discarded). Set MUSTER_TEST_VERBOSE=1 to see
// it on stderr.
//
// Do not build binaries that use this package with -trimpath: the apiserver
// test server locates its fixture directory through runtime.Caller.
package localcluster
