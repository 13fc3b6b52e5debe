package main

import (
	"context"
	"fmt"
	"os"
	"sort"

	cadvisorapi "github.com/google/cadvisor/info/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/featuregate"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	"k8s.io/kubernetes/pkg/features"
	kubeletconfiginternal "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/logs"
	"k8s.io/kubernetes/pkg/kubelet/stats/pidlimit"
	"k8s.io/kubernetes/pkg/kubelet/sysctl"
	"k8s.io/utils/cpuset"
	netutils "k8s.io/utils/net"
)

// Start is what the kubelet's later start-up steps said: the checks that come after
// ValidateKubeletConfiguration (cmd/kubelet/app/server.go InitializeTLS and run(),
// cm.NewContainerManager, kubelet.NewMainKubelet) and read nothing of the host but the
// cgroup version, or read the machine's CPUs and memory, which the oracle fixes (see
// fakeMachine). The kubelet stops at the first of them; the oracle runs each, so that
// every one a config trips is known.
type Start struct {
	// Exact lists the errors the kubelet prints, word for word.
	Exact []string
	// Inexact lists failures the kubelet has in other words than any one message (the
	// server's listener failing on an address that is not an IP).
	Inexact []string
	// Machine lists errors that depend on the machine's CPUs or memory (here the fake
	// machine): a static CPU or memory manager policy that this machine cannot satisfy.
	Machine []string
}

// fakeMachine is the machine the container manager's constructors are given: 8 CPUs (one
// thread per core), one socket, one NUMA node, 16 GiB. Only what depends on it is
// reported as Machine.
func fakeMachine() *cadvisorapi.MachineInfo {
	const memory = 16 << 30
	node := cadvisorapi.Node{Id: 0, Memory: memory, Distances: []uint64{10}}
	for i := 0; i < 8; i++ {
		node.Cores = append(node.Cores, cadvisorapi.Core{Id: i, Threads: []int{i}, SocketID: 0})
	}
	return &cadvisorapi.MachineInfo{
		NumCores:         8,
		NumPhysicalCores: 8,
		NumSockets:       1,
		MemoryCapacity:   memory,
		Topology:         []cadvisorapi.Node{node},
	}
}

// pristineGates are the process's feature gates as the kubelet starts with them: every
// Kubernetes gate (registered by pkg/features' init), none set. Each case gets a copy
// that becomes the process's gates (utilfeature.DefaultMutableFeatureGate and
// DefaultFeatureGate), as the kubelet's are its process's: its packages (defaulting, the
// container manager's) read them there. A copy, because a gate once set stays in a
// gate's raw settings for good, even a setting that failed.
var pristineGates = utilfeature.DefaultMutableFeatureGate.DeepCopy()

// caseGates makes a fresh copy of pristineGates the process's gates.
func caseGates() featuregate.MutableVersionedFeatureGate {
	gates := pristineGates.DeepCopy()
	utilfeature.DefaultMutableFeatureGate = gates
	utilfeature.DefaultFeatureGate = gates
	return gates
}

// startChecks runs the kubelet's later start-up checks on kc (see Start).
func startChecks(ctx context.Context, kf *options.KubeletFlags, kc *kubeletconfiginternal.KubeletConfiguration, gates featuregate.FeatureGate, host Host) Start {
	var s Start
	exact := func(err error) {
		if err != nil {
			s.Exact = append(s.Exact, err.Error())
		}
	}
	logger := klog.FromContext(ctx)

	// UnsecuredDependencies: InitializeTLS. The cipher suites one by one, so that every
	// unknown one is named (the kubelet names the first).
	for _, c := range kc.TLSCipherSuites {
		_, err := cliflag.TLSCipherSuites([]string{c})
		exact(err)
	}
	_, err := cliflag.TLSVersion(kc.TLSMinVersion)
	exact(err)
	_, err = cliflag.TLSCurvePreferences(kc.TLSCurvePreferences)
	exact(err)

	// run(): reservedSystemCPUs overrides the reserved cpu, then both lists are parsed
	// (key by key here), the hard eviction thresholds, qosReserved, swap.
	kubeReserved := copyMap(kc.KubeReserved)
	systemReserved := copyMap(kc.SystemReserved)
	reservedCPUs := cpuset.New()
	if kc.ReservedSystemCPUs != "" {
		if set, err := cpuset.Parse(kc.ReservedSystemCPUs); err == nil {
			reservedCPUs = set
		}
	}
	if reservedCPUs.Size() > 0 {
		delete(kubeReserved, "cpu")
		systemReserved["cpu"] = fmt.Sprint(reservedCPUs.Size())
	}
	kubeList := parseResourceListEach(kubeReserved, "--kube-reserved value failed to parse: %w", exact)
	systemList := parseResourceListEach(systemReserved, "--system-reserved value failed to parse: %w", exact)
	for _, k := range sortedKeys(kc.QOSReserved) {
		if _, err := cm.ParseQOSReserved(map[string]string{k: kc.QOSReserved[k]}); err != nil {
			exact(fmt.Errorf("--qos-reserved value failed to parse: %w", err))
		}
	}
	if gates.Enabled(features.NodeSwap) && !host.CgroupV2 && kc.MemorySwap.SwapBehavior == "LimitedSwap" {
		exact(fmt.Errorf("swap feature is enabled and LimitedSwap but it is only supported with cgroupv2"))
	}

	// cm.NewContainerManager: the topology, CPU and memory managers, on the fake machine.
	machine := fakeMachine()
	var topologyOptions map[string]string
	if gates.Enabled(features.TopologyManagerPolicyOptions) {
		topologyOptions = kc.TopologyManagerPolicyOptions
	} else if kc.TopologyManagerPolicyOptions != nil {
		exact(fmt.Errorf("topology manager policy options %v require feature gates %q enabled",
			kc.TopologyManagerPolicyOptions, features.TopologyManagerPolicyOptions))
	}
	topo, err := topologymanager.NewManager(machine.Topology, kc.TopologyManagerPolicy, kc.TopologyManagerScope, topologyOptions)
	exact(err)
	if topo == nil {
		topo, _ = topologymanager.NewManager(machine.Topology, topologymanager.PolicyNone, topologymanager.ContainerTopologyScope, nil)
	}
	reservation := allocatableReservation(kubeList, systemList, kc, machine)
	dir, err := os.MkdirTemp("", "kubelet-oracle-state-")
	if err == nil {
		defer os.RemoveAll(dir)
	}
	_, err = cpumanager.NewManager(logger, kc.CPUManagerPolicy, kc.CPUManagerPolicyOptions, kc.CPUManagerReconcilePeriod.Duration, machine, reservedCPUs, reservation, dir, topo)
	if err != nil {
		if kc.CPUManagerPolicy == "static" && reservation.Cpu().Value() > 0 {
			// The zero-reservation check passed: what fails now is the static policy on
			// this machine (more reserved CPUs than it has, options its topology lacks).
			s.Machine = append(s.Machine, err.Error())
		} else {
			exact(err)
		}
	}
	if kc.MemoryManagerPolicy == "Static" {
		// The static memory policy checks reservedMemory against the machine's NUMA
		// nodes' memory: the fake machine's answer is no node's.
		if _, err := memorymanager.NewManager(logger, kc.MemoryManagerPolicy, machine, reservation, kc.ReservedMemory, dir, topo); err != nil {
			s.Machine = append(s.Machine, err.Error())
		}
	} else {
		_, err = memorymanager.NewManager(logger, kc.MemoryManagerPolicy, machine, reservation, kc.ReservedMemory, dir, topo)
		exact(err)
	}

	// NewMainKubelet, in its order.
	if kc.SyncFrequency.Duration <= 0 {
		exact(fmt.Errorf("invalid sync frequency %d", kc.SyncFrequency.Duration))
	}
	switch kc.ConfigMapAndSecretChangeDetectionStrategy {
	case kubeletconfiginternal.WatchChangeDetectionStrategy, kubeletconfiginternal.TTLCacheChangeDetectionStrategy, kubeletconfiginternal.GetChangeDetectionStrategy:
	default:
		exact(fmt.Errorf("unknown configmap and secret manager mode: %v", kc.ConfigMapAndSecretChangeDetectionStrategy))
	}
	if _, err := logs.NewContainerLogManager(nil, nil, kc.ContainerLogMaxSize, int(kc.ContainerLogMaxFiles), int(kc.ContainerLogMaxWorkers), kc.ContainerLogMonitorInterval); err != nil {
		exact(fmt.Errorf("failed to initialize container log manager: %v", err))
	}
	_, err = sysctl.NewAllowlist(append(sysctl.SafeSysctlAllowlist(ctx), kc.AllowedUnsafeSysctls...))
	exact(err)

	// The server (RunKubelet, startKubelet): BuildAuthz when it serves, and the listener
	// on kc.Address, which fails on an address that is not an IP.
	if kc.EnableServer {
		switch kc.Authorization.Mode {
		case kubeletconfiginternal.KubeletAuthorizationModeAlwaysAllow, kubeletconfiginternal.KubeletAuthorizationModeWebhook:
		case "":
			exact(fmt.Errorf("no authorization mode specified"))
		default:
			exact(fmt.Errorf("unknown authorization mode %s", kc.Authorization.Mode))
		}
	}
	if (kc.EnableServer || kc.ReadOnlyPort > 0) && netutils.ParseIPSloppy(kc.Address) == nil {
		s.Inexact = append(s.Inexact, fmt.Sprintf("the server cannot listen on address %q", kc.Address))
	}
	return s
}

// parseResourceListEach follows the kubelet's parseResourceList (server.go), key by key
// in order, each error wrapped as run() wraps it; the list of the keys that parse.
func parseResourceListEach(m map[string]string, wrap string, report func(error)) v1.ResourceList {
	rl := v1.ResourceList{}
	for _, k := range sortedKeys(m) {
		v := m[k]
		switch v1.ResourceName(k) {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, pidlimit.PIDs:
			q, err := resource.ParseQuantity(v)
			if err != nil {
				report(fmt.Errorf(wrap, fmt.Errorf("failed to parse quantity %q for %q resource: %w", v, k, err)))
				continue
			}
			if q.Sign() == -1 {
				report(fmt.Errorf(wrap, fmt.Errorf("resource quantity for %q cannot be negative: %v", k, v)))
				continue
			}
			rl[v1.ResourceName(k)] = q
		default:
			report(fmt.Errorf(wrap, fmt.Errorf("cannot reserve %q resource", k)))
		}
	}
	return rl
}

// allocatableReservation follows GetNodeAllocatableReservation
// (node_container_manager_linux.go): system + kube reserved + the hard eviction
// thresholds, for the machine's capacity.
func allocatableReservation(kube, system v1.ResourceList, kc *kubeletconfiginternal.KubeletConfiguration, machine *cadvisorapi.MachineInfo) v1.ResourceList {
	capacity := v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(int64(machine.NumCores)*1000, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(int64(machine.MemoryCapacity), resource.BinarySI),
	}
	var evictionMemory *resource.Quantity
	if thresholds, err := eviction.ParseThresholdConfig([]string{}, kc.EvictionHard, nil, nil, nil); err == nil {
		for _, t := range thresholds {
			if t.Signal == evictionapi.SignalMemoryAvailable && t.Operator == evictionapi.OpLessThan {
				q := evictionapi.GetThresholdQuantity(t.Value, capacity.Memory())
				evictionMemory = q
			}
		}
	}
	result := v1.ResourceList{}
	for k := range capacity {
		value := resource.NewQuantity(0, resource.DecimalSI)
		if q, ok := system[k]; ok {
			value.Add(q)
		}
		if q, ok := kube[k]; ok {
			value.Add(q)
		}
		if k == v1.ResourceMemory && evictionMemory != nil {
			value.Add(*evictionMemory)
		}
		if !value.IsZero() {
			result[k] = *value
		}
	}
	return result
}

func copyMap(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
