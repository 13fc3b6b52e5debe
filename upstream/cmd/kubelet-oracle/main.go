// Command kubelet-oracle answers what a v1.36 kubelet answers about a configuration,
// with the kubelet's own code, for comparing kubelet-gitops' core with it (issue 14).
//
//	kubelet-oracle effective [kubelet flags...]
//	kubelet-oracle batch < cases.jsonl
//	kubelet-oracle hash < cases.jsonl
//	kubelet-oracle flags            (flags.go: every flag, with the config field it sets)
//	kubelet-oracle gates            (gates.go: every feature gate, with its dependencies)
//	kubelet-oracle bench [--rounds N] < configs.jsonl   (bench.go: decode+default+validate timed)
//
// `batch` reads JSON lines {"config": YAML or null, "dropIns": {NAME: YAML}, "args":
// [FLAG...]}, writes each case's files to a directory of its own, and prints for each
// the result of `effective --config=<file> [--config-dir=<dir>] FLAG...` as a JSON line,
// with "nanos": the time the kubelet's steps took (files written before, not counted).
//
// `hash` reads JSON lines {"name": NAME, "file": BASE64} and prints, a line for each, the
// name `kubectl create configmap NAME --from-file=kubelet=FILE --append-hash` gives:
// the file under data (valid UTF-8) or binaryData (any other bytes), as
// create_configmap.go decides, hashed by k8s.io/kubectl/pkg/util/hash.
//
// `effective` does what `kubelet [flags...]` does at start before it touches the host
// (cmd/kubelet/app/server.go, NewKubeletCommand's RunE, up to and including
// ValidateKubeletConfiguration), in the same order and with the same packages:
//
//  1. the command line parsed into the kubelet's flag set (KubeletFlags,
//     AddKubeletConfigFlags over the flag defaults, the global flags);
//  2. feature gates from the flags, ValidateKubeletFlags;
//  3. --config loaded (strict decoding, else lenient with the kubelet's warning), relative
//     paths resolved, evictionHard defaulted as the kubelet does;
//  4. --config-dir's *.conf drop-ins merged in lexical walk order (JSON merge patches over
//     the v1beta1 form, defaulted again);
//  5. the command line parsed again over the result (flag precedence), feature gates set
//     from the result;
//  6. the logging options validated;
//  7. ValidateKubeletConfiguration with the resulting gates;
//  8. the eviction thresholds parsed as NewMainKubelet parses them
//     (pkg/kubelet/kubelet.go, eviction.ParseThresholdConfig): later in the kubelet's
//     start, after it has read the machine, but a config whose thresholds do not parse
//     (a soft threshold without a grace period) makes it exit all the same, and the
//     parse reads nothing of the host;
//  9. the other checks later in its start that read nothing of the host, or only the
//     machine's CPUs and memory, which are fixed here (start.go: TLS, reserved
//     resources, qosReserved, swap, the topology/CPU/memory managers on a fake machine,
//     NewMainKubelet's sync frequency, configMap mode, log manager and sysctls, the
//     server's authorization mode and address). What only the fake machine decides is
//     reported apart ("machine"), as is a failure the kubelet words otherwise than one
//     message ("inexact").
//
// It prints one JSON object: the stage that failed (or "ok"), its error, the strict
// decoding error of --config when the kubelet fell back to lenient decoding, the
// validation errors one by one, the effective configuration in v1beta1 JSON, and the one
// host fact the steps read. Validation reads only the cgroup version of the host
// (validation_linux.go: failCgroupV1 and singleProcessOOMKill on cgroup v1; the swap
// check at start too); the oracle reports the version it saw, so that a comparison gives
// core the same host. A panic in the kubelet's code is an answer (stage "panic").
//
// The steps are written here, not called, because the kubelet keeps them unexported in
// package app; each names the upstream function it follows.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/go-logr/logr"
	libcontainercgroups "github.com/opencontainers/cgroups"
	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	cliflag "k8s.io/component-base/cli/flag"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/klog/v2"
	kubectlhash "k8s.io/kubectl/pkg/util/hash"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	// The kubelet's command package, for what its init registers: the logging feature
	// gates (LoggingAlphaOptions, LoggingBetaOptions) a kubelet knows and a bare
	// pkg/features does not.
	_ "k8s.io/kubernetes/cmd/kubelet/app"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfiginternal "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletconfigv1beta1conversion "k8s.io/kubernetes/pkg/kubelet/apis/config/v1beta1"
	kubeletconfigvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
)

// Result is what the oracle prints.
type Result struct {
	// Stage is "ok", or the step that failed: "flags", "feature-gates", "load",
	// "merge", "precedence", "logging", "validate", "eviction", "start" (a later check
	// of the kubelet's start, see Start); or "panic" when the
	// kubelet's code panicked (a v1.36 kubelet panics while defaulting a config file
	// that names an unknown feature gate: it crashes at start).
	Stage string `json:"stage"`
	// Error is the failing step's error, as the kubelet would wrap it.
	Error string `json:"error,omitempty"`
	// StrictError is set when --config failed strict decoding and the kubelet went on
	// with lenient decoding (a warning, not a failure).
	StrictError string `json:"strictError,omitempty"`
	// DropInStrictErrors lists the strict decoding errors of drop-ins (unknown or
	// duplicate fields): the kubelet merges a drop-in as JSON and never decodes it
	// strictly, so it says nothing of them.
	DropInStrictErrors []string `json:"dropInStrictErrors,omitempty"`
	// ValidationErrors lists ValidateKubeletConfiguration's errors one by one.
	ValidationErrors []string `json:"validationErrors,omitempty"`
	// Effective is the configuration after every step that succeeded, in v1beta1 JSON.
	Effective json.RawMessage `json:"effective,omitempty"`
	// Host is what validation read of this machine.
	Host Host `json:"host"`
	// Inexact lists failures later in the kubelet's start that it words otherwise (see
	// Start); Machine, what the fake machine's CPUs and memory decided (not a verdict).
	Inexact []string `json:"inexact,omitempty"`
	Machine []string `json:"machine,omitempty"`
	// ConfigPath is the --config file the kubelet read (relative paths in it are
	// resolved against its directory).
	ConfigPath string `json:"configPath,omitempty"`
	// Nanos is how long the kubelet's steps took (batch only).
	Nanos int64 `json:"nanos,omitempty"`
}

// cgroupV2 is whether this machine's /sys/fs/cgroup is the unified (v2) hierarchy.
var cgroupV2 = libcontainercgroups.IsCgroup2UnifiedMode()

// Host is the machine as the kubelet's validation sees it.
type Host struct {
	// CgroupV2 is whether /sys/fs/cgroup is the unified (v2) hierarchy.
	CgroupV2 bool `json:"cgroupV2"`
}

func main() {
	// The kubelet's code logs as it goes (deprecated gates, managers created): not part
	// of any answer, and slow at this volume.
	klog.SetLogger(logr.Discard())
	if len(os.Args) == 2 && os.Args[1] == "batch" {
		if err := batch(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "hash" {
		if err := hashNames(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "gates" {
		if err := listGates(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) == 2 && os.Args[1] == "flags" {
		if err := listFlags(os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) >= 2 && os.Args[1] == "bench" {
		if err := benchConfigs(os.Args[2:], os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) < 2 || os.Args[1] != "effective" {
		fmt.Fprintln(os.Stderr, "usage: kubelet-oracle effective [kubelet flags...] | kubelet-oracle batch < cases.jsonl | kubelet-oracle hash < cases.jsonl")
		os.Exit(2)
	}
	result := effective(context.Background(), os.Args[2:])
	result.Host = Host{CgroupV2: cgroupV2}
	out, err := json.Marshal(result)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// batch answers `batch`: a result per JSON line of in.
func batch(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(in)
	enc := json.NewEncoder(out)
	host := Host{CgroupV2: cgroupV2}
	for {
		var c struct {
			Config  *string           `json:"config"`
			DropIns map[string]string `json:"dropIns"`
			Args    []string          `json:"args"`
		}
		if err := dec.Decode(&c); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading a case: %w", err)
		}
		dir, err := os.MkdirTemp("", "kubelet-oracle-")
		if err != nil {
			return err
		}
		var args []string
		if c.Config != nil {
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(*c.Config), 0o600); err != nil {
				return err
			}
			args = append(args, "--config="+path)
		}
		if len(c.DropIns) > 0 {
			confD := filepath.Join(dir, "conf.d")
			if err := os.Mkdir(confD, 0o700); err != nil {
				return err
			}
			for name, body := range c.DropIns {
				if err := os.WriteFile(filepath.Join(confD, name), []byte(body), 0o600); err != nil {
					return err
				}
			}
			args = append(args, "--config-dir="+confD)
		}
		args = append(args, c.Args...)
		start := time.Now()
		result := effective(context.Background(), args)
		result.Nanos = time.Since(start).Nanoseconds()
		result.Host = host
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
		if err := enc.Encode(result); err != nil {
			return err
		}
	}
}

// hashNames answers `hash`: a ConfigMap name per JSON line of in.
func hashNames(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(in)
	for {
		var c struct {
			Name string `json:"name"`
			File []byte `json:"file"`
		}
		if err := dec.Decode(&c); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("reading a case: %w", err)
		}
		cm := &v1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{Name: c.Name},
			Data:       map[string]string{},
			BinaryData: map[string][]byte{},
		}
		if utf8.Valid(c.File) {
			cm.Data["kubelet"] = string(c.File)
		} else {
			cm.BinaryData["kubelet"] = c.File
		}
		h, err := kubectlhash.ConfigMapHash(cm)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "%s-%s\n", c.Name, h); err != nil {
			return err
		}
	}
}

// effective runs the kubelet's start-up steps on args; a panic in them is the result
// (stage "panic"), as the kubelet would crash.
func effective(ctx context.Context, args []string) (result Result) {
	defer func() {
		if r := recover(); r != nil {
			result = Result{Stage: "panic", Error: fmt.Sprint(r)}
		}
	}()
	return steps(ctx, args)
}

// steps are the kubelet's start-up steps on args.
func steps(ctx context.Context, args []string) Result {
	// The kubelet's gates, fresh for the case (see pristineGates).
	gates := caseGates()
	kubeletFlags := options.NewKubeletFlags()
	kubeletConfig, err := options.NewKubeletConfiguration()
	if err != nil {
		return Result{Stage: "flags", Error: err.Error()}
	}
	// NewKubeletCommand: the clean flag set.
	flags := pflag.NewFlagSet("kubelet", pflag.ContinueOnError)
	flags.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	flags.SetOutput(io.Discard)
	kubeletFlags.AddFlags(flags)
	options.AddKubeletConfigFlags(flags, kubeletConfig)
	options.AddGlobalFlags(flags)
	if err := flags.Parse(args); err != nil {
		return Result{Stage: "flags", Error: fmt.Sprintf("failed to parse kubelet flag: %v", err)}
	}
	if rest := flags.Args(); len(rest) > 0 {
		return Result{Stage: "flags", Error: fmt.Sprintf("unknown command %+s", rest[0])}
	}
	if err := gates.SetFromMap(kubeletConfig.FeatureGates); err != nil {
		return Result{Stage: "feature-gates", Error: fmt.Sprintf("failed to set feature gates from initial flags-based config: %v", err)}
	}
	if err := options.ValidateKubeletFlags(kubeletFlags); err != nil {
		return Result{Stage: "flags", Error: fmt.Sprintf("failed to validate kubelet flags: %v", err)}
	}

	var result Result
	if kubeletFlags.KubeletConfigFile != "" {
		if abs, err := filepath.Abs(kubeletFlags.KubeletConfigFile); err == nil {
			result.ConfigPath = abs
		}
		kc, strict, err := loadConfigFile(ctx, kubeletFlags.KubeletConfigFile)
		result.StrictError = strict
		if err != nil {
			result.Stage = "load"
			result.Error = fmt.Sprintf("failed to load kubelet config file, path: %s, error: %v", kubeletFlags.KubeletConfigFile, err)
			return result
		}
		kubeletConfig = kc
	}
	if kubeletFlags.KubeletDropinConfigDirectory != "" {
		strict, err := mergeDropIns(kubeletConfig, kubeletFlags.KubeletDropinConfigDirectory)
		result.DropInStrictErrors = strict
		if err != nil {
			result.Stage = "merge"
			result.Error = fmt.Sprintf("failed to merge kubelet configs: %v", err)
			return result
		}
	}
	if kubeletFlags.KubeletConfigFile != "" || kubeletFlags.KubeletDropinConfigDirectory != "" {
		if err := flagPrecedence(kubeletConfig, args); err != nil {
			result.Stage = "precedence"
			result.Error = fmt.Sprintf("failed to precedence kubeletConfigFlag: %v", err)
			return result
		}
		if err := gates.SetFromMap(kubeletConfig.FeatureGates); err != nil {
			result.Stage = "feature-gates"
			result.Error = fmt.Sprintf("failed to set feature gates from initial flags-based config: %v", err)
			return result
		}
	}
	result.Effective = versioned(kubeletConfig)
	// ValidateAndApplyAsField would also apply the options to this process's logging;
	// validating is what decides whether the kubelet starts.
	if errs := logsapi.Validate(&kubeletConfig.Logging, gates, field.NewPath("logging")); len(errs) > 0 {
		result.Stage = "logging"
		result.Error = fmt.Sprintf("initialize logging: %v", errs.ToAggregate())
		for _, e := range errs {
			result.ValidationErrors = append(result.ValidationErrors, e.Error())
		}
		return result
	}
	if err := kubeletconfigvalidation.ValidateKubeletConfiguration(kubeletConfig, gates); err != nil {
		result.Stage = "validate"
		result.Error = fmt.Sprintf("failed to validate kubelet configuration, error: %v", err)
		var agg utilerrors.Aggregate
		if errors.As(err, &agg) {
			for _, e := range agg.Errors() {
				result.ValidationErrors = append(result.ValidationErrors, e.Error())
			}
		} else {
			result.ValidationErrors = []string{err.Error()}
		}
		return result
	}
	enforced := kubeletConfig.EnforceNodeAllocatable
	if kubeletFlags.ExperimentalNodeAllocatableIgnoreEvictionThreshold {
		enforced = []string{}
	}
	if _, err := eviction.ParseThresholdConfig(enforced, kubeletConfig.EvictionHard, kubeletConfig.EvictionSoft, kubeletConfig.EvictionSoftGracePeriod, kubeletConfig.EvictionMinimumReclaim); err != nil {
		result.Stage = "eviction"
		result.Error = err.Error()
		result.ValidationErrors = []string{err.Error()}
		return result
	}
	start := startChecks(ctx, kubeletFlags, kubeletConfig, gates, Host{CgroupV2: cgroupV2})
	result.Inexact = start.Inexact
	result.Machine = start.Machine
	if len(start.Exact) > 0 || len(start.Inexact) > 0 {
		result.Stage = "start"
		result.Error = strings.Join(append(append([]string{}, start.Exact...), start.Inexact...), "; ")
		result.ValidationErrors = start.Exact
		return result
	}
	result.Stage = "ok"
	return result
}

// loadConfigFile follows the kubelet's loadConfigFile (server.go): the file loader
// (strict decoding, else lenient), then evictionHard's defaults. It also returns the
// strict decoding error the kubelet only logs when it falls back to lenient decoding.
func loadConfigFile(ctx context.Context, name string) (*kubeletconfiginternal.KubeletConfiguration, string, error) {
	const errFmt = "failed to load Kubelet config file %s, error %v"
	path, err := filepath.Abs(name)
	if err != nil {
		return nil, "", fmt.Errorf(errFmt, name, err)
	}
	strict := strictError(path)
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, path)
	if err != nil {
		return nil, strict, fmt.Errorf(errFmt, name, err)
	}
	kc, err := loader.Load(ctx)
	if err != nil {
		return nil, strict, fmt.Errorf(errFmt, name, err)
	}
	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard {
			if _, exists := kc.EvictionHard[k]; !exists {
				kc.EvictionHard[k] = v
			}
		}
	}
	return kc, strict, nil
}

// strictError is the strict decoder's error for the file at path, when it is a strict
// decoding error (the case in which the kubelet decodes leniently and warns).
func strictError(path string) string {
	data, err := os.ReadFile(path)
	if err != nil || len(data) == 0 {
		return ""
	}
	_, codecs, err := kubeletscheme.NewSchemeAndCodecs(serializer.EnableStrict)
	if err != nil {
		return ""
	}
	if _, _, err := codecs.UniversalDecoder().Decode(data, nil, nil); err != nil && runtime.IsStrictDecodingError(err) {
		return err.Error()
	}
	return ""
}

// mergeDropIns follows the kubelet's mergeKubeletConfigurations (server.go): the config
// as v1beta1 JSON, each *.conf file of the walk a JSON merge patch over it, then decoded,
// defaulted and converted back.
//
// It also returns each drop-in's strict decoding error, which the kubelet does not look
// for (see Result.DropInStrictErrors).
func mergeDropIns(kc *kubeletconfiginternal.KubeletConfiguration, dir string) ([]string, error) {
	var strict []string
	v := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := kubeletconfigv1beta1conversion.Convert_config_KubeletConfiguration_To_v1beta1_KubeletConfiguration(kc, v, nil); err != nil {
		return nil, err
	}
	base, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal base config: %w", err)
	}
	walk := func(path string, entry fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() || filepath.Ext(entry.Name()) != ".conf" {
			return nil
		}
		if e := strictError(path); e != "" {
			strict = append(strict, e)
		}
		patch, gvk, err := loadDropIn(path)
		if err != nil {
			return fmt.Errorf("failed to load kubelet dropin file, path: %s, error: %w", path, err)
		}
		if gvk == nil || gvk.Empty() {
			return fmt.Errorf("failed to load kubelet dropin file, path: %s, no apiVersion/kind", path)
		}
		if *gvk != kubeletconfigv1beta1.SchemeGroupVersion.WithKind("KubeletConfiguration") {
			return fmt.Errorf("failed to load kubelet dropin file, path: %s, unknown apiVersion/kind: %v", path, gvk.String())
		}
		merged, err := jsonpatch.MergePatch(base, patch)
		if err != nil {
			return fmt.Errorf("failed to merge drop-in and current config: %w", err)
		}
		base = merged
		return nil
	}
	if err := filepath.WalkDir(dir, walk); err != nil {
		return strict, fmt.Errorf("failed to walk through kubelet dropin directory %q: %w", dir, err)
	}
	v = &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := json.Unmarshal(base, v); err != nil {
		return strict, fmt.Errorf("failed to unmarshal merged JSON into kubelet configuration: %w", err)
	}
	kubeletconfigv1beta1conversion.SetDefaults_KubeletConfiguration(v)
	if err := kubeletconfigv1beta1conversion.Convert_v1beta1_KubeletConfiguration_To_config_KubeletConfiguration(v, kc, nil); err != nil {
		return strict, fmt.Errorf("failed to convert merged config to internal kubelet configuration: %w", err)
	}
	return strict, nil
}

// loadDropIn follows the kubelet's loadDropinConfigFileIntoJSON (server.go).
func loadDropIn(name string) ([]byte, *schema.GroupVersionKind, error) {
	const errFmt = "failed to load drop-in kubelet config file %s, error %v"
	path, err := filepath.Abs(name)
	if err != nil {
		return nil, nil, fmt.Errorf(errFmt, name, err)
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, path)
	if err != nil {
		return nil, nil, fmt.Errorf(errFmt, name, err)
	}
	return loader.LoadIntoJSON()
}

// flagPrecedence follows the kubelet's kubeletConfigFlagPrecedence (server.go): the
// command line parsed again over kc, with throwaway KubeletFlags and no-op global flags,
// and the feature gates kc had that the flags do not name put back.
func flagPrecedence(kc *kubeletconfiginternal.KubeletConfiguration, args []string) error {
	globals := pflag.NewFlagSet("", pflag.ContinueOnError)
	globals.SetNormalizeFunc(cliflag.WordSepNormalizeFunc)
	options.AddGlobalFlags(globals)
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.SetNormalizeFunc(globals.GetNormalizeFunc())
	globals.VisitAll(func(f *pflag.Flag) {
		fs.VarP(cliflag.NoOp{}, f.Name, f.Shorthand, f.Usage)
	})
	options.NewKubeletFlags().AddFlags(fs)
	options.AddKubeletConfigFlags(fs, kc)
	original := kc.FeatureGates
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return err
	}
	for k, v := range original {
		if _, ok := kc.FeatureGates[k]; !ok {
			kc.FeatureGates[k] = v
		}
	}
	return nil
}

// versioned is kc in v1beta1 JSON (what /configz shows).
func versioned(kc *kubeletconfiginternal.KubeletConfiguration) json.RawMessage {
	v := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := kubeletconfigv1beta1conversion.Convert_config_KubeletConfiguration_To_v1beta1_KubeletConfiguration(kc, v, nil); err != nil {
		return nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return out
}
