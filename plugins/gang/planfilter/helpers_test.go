package planfilter

import "k8s.io/klog/v2"

func klogless() klog.Logger { return klog.Background() }
