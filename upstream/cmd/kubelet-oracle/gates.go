package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"k8s.io/component-base/featuregate"
)

// Gate is one feature gate as a v1.36 kubelet's process holds it (`gates`).
type Gate struct {
	Name string `json:"name"`
	// Default is its value when the config does not set it.
	Default bool `json:"default"`
	// Locked is whether setting it to anything but Default is refused.
	Locked bool `json:"locked"`
	// Stage is "ALPHA", "BETA", "GA", "DEPRECATED" or "PRE-ALPHA".
	Stage string `json:"stage"`
	// DependsOn lists the gates that must be enabled when it is, sorted.
	DependsOn []string `json:"dependsOn,omitempty"`
}

// listGates answers `gates`: every gate the kubelet's process knows (pkg/features and
// what cmd/kubelet/app's and pkg/kubelet/server's init add, see the blank import in
// main.go), at the binary's version, sorted by name, one JSON line each.
func listGates(out io.Writer) error {
	gates := pristineGates.DeepCopy()
	deps := map[featuregate.Feature][]featuregate.Feature{}
	if d, ok := gates.(interface {
		Dependencies() map[featuregate.Feature][]featuregate.Feature
	}); ok {
		deps = d.Dependencies()
	} else {
		return fmt.Errorf("this featuregate has no Dependencies()")
	}
	all := gates.GetAll()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, string(name))
	}
	sort.Strings(names)
	enc := json.NewEncoder(out)
	for _, name := range names {
		spec := all[featuregate.Feature(name)]
		stage := string(spec.PreRelease)
		if stage == "" {
			stage = "GA"
		}
		var on []string
		for _, d := range deps[featuregate.Feature(name)] {
			on = append(on, string(d))
		}
		sort.Strings(on)
		if err := enc.Encode(Gate{Name: name, Default: spec.Default, Locked: spec.LockToDefault, Stage: stage, DependsOn: on}); err != nil {
			return err
		}
	}
	return nil
}
