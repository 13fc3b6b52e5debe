package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	cliflag "k8s.io/component-base/cli/flag"
	// The kubelet's main package links the JSON log format in (cmd/kubelet/kubelet.go):
	// it registers --log-json-split-stream and --log-json-info-buffer-size, and makes
	// logging.format json valid. The oracle's process must have it too.
	_ "k8s.io/component-base/logs/json/register"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
)

// FlagInfo is what `flags` prints of one kubelet flag, a JSON line each.
type FlagInfo struct {
	Name      string `json:"name"`
	Shorthand string `json:"shorthand,omitempty"`
	// Type is the pflag type (flag.Value.Type()): "int32", "mapStringString", ...
	Type string `json:"type"`
	// GoType is the flag value's Go type, "<package path>.<name>": it tells apart the
	// flag types that share a pflag type (the three mapStringString parsers).
	GoType string `json:"goType"`
	// NoSplit is set for a MapStringString that takes one pair per occurrence.
	NoSplit bool `json:"noSplit,omitempty"`
	// NoOptDefVal is the value the flag takes when given without one ("true" for
	// booleans), empty when it needs a value.
	NoOptDefVal string `json:"noOptDefVal,omitempty"`
	// Default is the flag's default as pflag prints it.
	Default    string `json:"default"`
	Deprecated bool   `json:"deprecated"`
	Hidden     bool   `json:"hidden"`
	// Group is where the kubelet registers it: "config" (AddKubeletConfigFlags),
	// "kubelet" (KubeletFlags.AddFlags) or "global" (AddGlobalFlags, cobra's help).
	Group string `json:"group"`
	// Field is, for a config flag that changes exactly one field, that field's dotted
	// v1beta1 JSON path ("authentication.webhook.cacheTTL").
	Field string `json:"field,omitempty"`
	// Fields is, for a config flag, every field path the probe changed: one (then Field
	// is set), several, or none (the flag wrote nothing the v1beta1 form shows).
	Fields []string `json:"fields"`
	// Probe is the value the flag was given to find its fields; ProbeError, why no
	// probe value changed anything, when none did.
	Probe      string `json:"probe,omitempty"`
	ProbeError string `json:"probeError,omitempty"`
}

// listFlags answers `flags`: every flag of the kubelet's flag set (NewKubeletCommand's
// cleanFlagSet: KubeletFlags, AddKubeletConfigFlags over the defaults, the global flags,
// cobra's help), a JSON line each, sorted by name. Each part is built in a flag set of
// its own to tell the groups apart, and the parts together must be the flag set steps()
// parses with (help aside). A config flag's fields are found by parsing it with a
// distinctive value over the defaults and seeing which v1beta1 fields changed.
func listFlags(out io.Writer) error {
	newSet := func() *pflag.FlagSet {
		fs := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
		fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
		fs.SetOutput(io.Discard)
		return fs
	}
	kubeletConfig, err := options.NewKubeletConfiguration()
	if err != nil {
		return err
	}
	kubeletPart := newSet()
	options.NewKubeletFlags().AddFlags(kubeletPart)
	configPart := newSet()
	options.AddKubeletConfigFlags(configPart, kubeletConfig)
	globalPart := newSet()
	options.AddGlobalFlags(globalPart)
	// NewKubeletCommand: cleanFlagSet.BoolP("help", "h", false, "help for kubelet").
	globalPart.BoolP("help", "h", false, "help for kubelet")

	// The whole set as steps() builds it, to check the parts against.
	whole := newSet()
	options.NewKubeletFlags().AddFlags(whole)
	wholeConfig, err := options.NewKubeletConfiguration()
	if err != nil {
		return err
	}
	options.AddKubeletConfigFlags(whole, wholeConfig)
	options.AddGlobalFlags(whole)

	parts := []struct {
		group string
		fs    *pflag.FlagSet
	}{{"kubelet", kubeletPart}, {"config", configPart}, {"global", globalPart}}
	var flags []FlagInfo
	seen := map[string]string{}
	for _, part := range parts {
		var failed error
		part.fs.VisitAll(func(f *pflag.Flag) {
			if failed != nil {
				return
			}
			if g, ok := seen[f.Name]; ok {
				failed = fmt.Errorf("flag %q registered by both %s and %s", f.Name, g, part.group)
				return
			}
			seen[f.Name] = part.group
			if f.Name != "help" && whole.Lookup(f.Name) == nil {
				failed = fmt.Errorf("flag %q of %s is not in the kubelet's flag set", f.Name, part.group)
				return
			}
			info := describe(f, part.group)
			if part.group == "config" {
				info.Probe, info.Fields, info.ProbeError = probeFields(f)
				if len(info.Fields) == 1 {
					info.Field = info.Fields[0]
				}
			}
			flags = append(flags, info)
		})
		if failed != nil {
			return failed
		}
	}
	var missing error
	whole.VisitAll(func(f *pflag.Flag) {
		if _, ok := seen[f.Name]; !ok && missing == nil {
			missing = fmt.Errorf("flag %q of the kubelet's flag set is in no part", f.Name)
		}
	})
	if missing != nil {
		return missing
	}
	sort.Slice(flags, func(i, j int) bool { return flags[i].Name < flags[j].Name })
	enc := json.NewEncoder(out)
	for _, f := range flags {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

// describe is what the flag set says of f.
func describe(f *pflag.Flag, group string) FlagInfo {
	info := FlagInfo{
		Name:        f.Name,
		Shorthand:   f.Shorthand,
		Type:        f.Value.Type(),
		GoType:      goTypeName(f.Value),
		NoOptDefVal: f.NoOptDefVal,
		Default:     f.DefValue,
		Deprecated:  f.Deprecated != "",
		Hidden:      f.Hidden,
		Group:       group,
	}
	if m, ok := f.Value.(*cliflag.MapStringString); ok {
		info.NoSplit = m.NoSplit
	}
	return info
}

// goTypeName is v's Go type as "<package path>.<name>", pointers dereferenced.
func goTypeName(v interface{}) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.PkgPath() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// probeValues are distinctive values for a flag of f's pflag type, tried in order until
// one parses and changes the config.
func probeValues(f *pflag.Flag) []string {
	switch f.Value.Type() {
	case "bool":
		if f.DefValue == "true" {
			return []string{"false"}
		}
		return []string{"true"}
	case "int", "int32", "int64", "uint", "uint32", "uint64":
		return []string{"4321"}
	case "Level":
		return []string{"7"}
	case "duration":
		return []string{"7m13s"}
	case "ip":
		return []string{"10.11.12.13"}
	case "quantity":
		return []string{"123Ki"}
	case "stringSlice":
		return []string{"oracle-a,oracle-b"}
	case "mapStringString":
		// MapStringString and ConfigurationMap take k=v; LangleSeparatedMapStringString,
		// k<v.
		return []string{"oracle-key=oracle-value", "memory.available<123Mi"}
	case "mapStringBool":
		// Any gate parses; this one is not locked to its default.
		return []string{"CPUManagerPolicyAlphaOptions=true"}
	case "colonSeparatedMultimapStringString":
		return []string{"X-Oracle:oracle-value"}
	case "[]v1.Taint":
		return []string{"oracle-key=oracle-value:NoSchedule"}
	case "reserved-memory":
		return []string{"0:memory=1Gi"}
	case "pattern=N,...":
		return []string{"oracle=3"}
	default:
		return []string{"oracle-value", "4321", "true"}
	}
}

// probeFields parses f, alone, with each probe value over a fresh default config and
// returns the first value that changed the v1beta1 form, with the fields it changed; or
// why none did.
func probeFields(f *pflag.Flag) (string, []string, string) {
	defaults, err := options.NewKubeletConfiguration()
	if err != nil {
		return "", nil, err.Error()
	}
	base, err := decodeJSON(versioned(defaults))
	if err != nil {
		return "", nil, err.Error()
	}
	configType := reflect.TypeOf(kubeletconfigv1beta1.KubeletConfiguration{})
	var problems []string
	for _, value := range probeValues(f) {
		kc, err := options.NewKubeletConfiguration()
		if err != nil {
			return "", nil, err.Error()
		}
		fs := pflag.NewFlagSet("probe", pflag.ContinueOnError)
		fs.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
		fs.SetOutput(io.Discard)
		options.AddKubeletConfigFlags(fs, kc)
		if err := fs.Parse([]string{"--" + f.Name + "=" + value}); err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", value, err))
			continue
		}
		after, err := decodeJSON(versioned(kc))
		if err != nil {
			return "", nil, err.Error()
		}
		changed := diffFields(configType, base, after, "")
		if len(changed) > 0 {
			return value, changed, ""
		}
		problems = append(problems, fmt.Sprintf("%s: no field changed", value))
	}
	return "", []string{}, strings.Join(problems, "; ")
}

// decodeJSON decodes raw, which must be a JSON document.
func decodeJSON(raw json.RawMessage) (interface{}, error) {
	if raw == nil {
		return nil, fmt.Errorf("the config does not convert to v1beta1")
	}
	var v interface{}
	err := json.Unmarshal(raw, &v)
	return v, err
}

// diffFields lists the dotted JSON paths of the fields of a (Go type t) whose JSON
// values differ between a and b. It descends into structs only: a map, a list or a
// value that marshals as a scalar (a duration, a quantity) is one field.
func diffFields(t reflect.Type, a, b interface{}, prefix string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	am, aObj := a.(map[string]interface{})
	bm, bObj := b.(map[string]interface{})
	if a == nil {
		aObj = true
	}
	if b == nil {
		bObj = true
	}
	if t.Kind() != reflect.Struct || !aObj || !bObj {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{prefix}
	}
	var changed []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if sf.Anonymous && name == "" {
			// Inlined: its fields are this object's.
			changed = append(changed, diffFields(sf.Type, a, b, prefix)...)
			continue
		}
		if name == "" {
			name = sf.Name
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		changed = append(changed, diffFields(sf.Type, am[name], bm[name], path)...)
	}
	return changed
}
