package app

import (
	"context"
	"fmt"

	"github.com/muster-io/muster/localcluster"
)

// KueueOperator is the operator (localcluster/operators) that runs Kueue.
const KueueOperator = "kueue"

// Kueue's queues in the sandbox: submit with the label
// kueue.x-k8s.io/queue-name=KueueLocalQueue in namespace default.
const (
	KueueClusterQueue = "gpus"
	KueueLocalQueue   = "default"
	kueueNamespace    = "kueue-system"
	kueueUserNS       = "default"
)

// startKueue runs Kueue (Kueue) and makes its queues: a ResourceFlavor
// and the ClusterQueue KueueClusterQueue with KueueGPUs of quota, and the
// LocalQueue KueueLocalQueue in the default namespace. Kueue asked for
// and not running is an error: without it nothing the examples submit
// would ever start.
func (sb *sandbox) startKueue(ctx context.Context) error {
	if err := createNamespace(ctx, sb.cp, kueueNamespace); err != nil {
		return err
	}
	if err := sb.ensureOperator(ctx, KueueOperator); err != nil {
		return err
	}
	if why := sb.unavailable[KueueOperator]; why != "" {
		return fmt.Errorf("--kueue: Kueue is not running: %s", why)
	}
	q := localcluster.KueueQueues{ClusterQueue: KueueClusterQueue, Namespace: kueueUserNS, LocalQueue: KueueLocalQueue, GPUs: sb.cfg.KueueGPUs}
	if _, err := sb.cp.Apply(ctx, []byte(localcluster.KueueQueuesYAML(q)), kueueUserNS); err != nil {
		return fmt.Errorf("Kueue queues: %w", err)
	}
	sb.progress("Kueue queues: ClusterQueue %s (%d nvidia.com/gpu of quota), LocalQueue %s in namespace %s; submit a workload with the label kueue.x-k8s.io/queue-name=%s",
		KueueClusterQueue, sb.cfg.KueueGPUs, KueueLocalQueue, kueueUserNS, KueueLocalQueue)
	return nil
}
