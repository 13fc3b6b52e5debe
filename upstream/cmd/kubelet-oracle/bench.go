package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubeletconfiginternal "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"
	kubeletconfigvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	utilcodec "k8s.io/kubernetes/pkg/kubelet/kubeletconfig/util/codec"
)

// BenchResult is what `bench` prints.
type BenchResult struct {
	// Configs is how many configs were read; Rounds, how many times each was timed
	// (after one warm-up round, not counted).
	Configs int `json:"configs"`
	Rounds  int `json:"rounds"`
	// Nanos is the time of the counted rounds, all configs, one OS thread.
	Nanos int64 `json:"nanos"`
	// ConfigsPerSecond is Configs*Rounds/Nanos: configs per second on one core.
	ConfigsPerSecond float64 `json:"configsPerSecond"`
	// BestRoundNanos is the fastest round's time, and BestConfigsPerSecond its rate: the
	// figure least disturbed by other work on the machine.
	BestRoundNanos       int64   `json:"bestRoundNanos"`
	BestConfigsPerSecond float64 `json:"bestConfigsPerSecond"`
	// Valid, Invalid and Panicked count one round's verdicts: the kubelet's code decoded
	// and validated the config; it refused it (decoding or validation); it panicked (a
	// v1.36 kubelet panics while defaulting a file naming an unknown feature gate).
	Valid    int `json:"valid"`
	Invalid  int `json:"invalid"`
	Panicked int `json:"panicked"`
	// DecodeFailed is how many of Invalid the decoder refused (strict, then lenient).
	DecodeFailed int `json:"decodeFailed"`
	// AllocBytesPerConfig is the heap the counted rounds allocated per config
	// (runtime.MemStats.TotalAlloc); PeakRSSBytes, the process's peak resident set
	// (/proc/self/status VmHWM, inputs included), 0 when unknown.
	AllocBytesPerConfig float64 `json:"allocBytesPerConfig"`
	PeakRSSBytes        int64   `json:"peakRssBytes"`
	// Host is what validation read of this machine (its cgroup version), so that a
	// comparison gives core the same host.
	Host Host `json:"host"`
}

// verdict is what the kubelet's code made of one config.
type verdict int

const (
	verdictValid verdict = iota
	verdictDecodeFailed
	verdictInvalid
	verdictPanicked
)

// benchConfigs answers `bench [--rounds N]`: it reads JSON lines {"config": YAML} (all
// of them, before timing anything) and times the kubelet's decode + default + validate
// of each, and nothing else (no file I/O, no flags, no drop-ins):
//
//  1. utilcodec.DecodeKubeletConfiguration with the kubelet's strict codecs (built once,
//     as configfiles.NewFsLoader builds them once per loader), which falls back to
//     lenient decoding as the kubelet's loader does; decoding runs the scheme's
//     defaulting;
//  2. evictionHard defaulted as loadConfigFile does (server.go);
//  3. the feature gates set from the config (a copy of the process's gates, as the
//     kubelet sets its own from its config: that copy is part of the cost), then
//     kubeletconfigvalidation.ValidateKubeletConfiguration with them.
//
// A panic in the kubelet's code is recovered and counted. The runtime is held to one OS
// thread running Go code (runtime.GOMAXPROCS(1), garbage collection included), so the
// figure is per core, comparable with a single-threaded run of core.
func benchConfigs(args []string, in io.Reader, out io.Writer) error {
	runtime.GOMAXPROCS(1)
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	rounds := fs.Int("rounds", 5, "timed rounds over every config (after one warm-up round)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("kubelet-oracle bench: %w", err)
	}
	if *rounds < 1 {
		return fmt.Errorf("kubelet-oracle bench: --rounds must be at least 1, not %d", *rounds)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("kubelet-oracle bench: unexpected argument %q", fs.Arg(0))
	}
	configs, err := readConfigs(in)
	if err != nil {
		return err
	}
	_, codecs, err := kubeletscheme.NewSchemeAndCodecs(serializer.EnableStrict)
	if err != nil {
		return err
	}
	ctx := context.Background()
	verdicts := make([]verdict, len(configs))
	run := func() {
		for i, data := range configs {
			verdicts[i] = decodeDefaultValidate(ctx, codecs, data)
		}
	}

	run() // warm-up
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var elapsed, best time.Duration
	for r := 0; r < *rounds; r++ {
		start := time.Now()
		run()
		took := time.Since(start)
		elapsed += took
		if r == 0 || took < best {
			best = took
		}
	}
	runtime.ReadMemStats(&after)

	result := BenchResult{
		Configs:        len(configs),
		Rounds:         *rounds,
		Nanos:          elapsed.Nanoseconds(),
		BestRoundNanos: best.Nanoseconds(),
		Host:           Host{CgroupV2: cgroupV2},
	}
	timed := float64(len(configs) * *rounds)
	if elapsed > 0 {
		result.ConfigsPerSecond = timed / elapsed.Seconds()
	}
	if best > 0 {
		result.BestConfigsPerSecond = float64(len(configs)) / best.Seconds()
	}
	if timed > 0 {
		result.AllocBytesPerConfig = float64(after.TotalAlloc-before.TotalAlloc) / timed
	}
	result.PeakRSSBytes = peakRSS()
	for _, v := range verdicts {
		switch v {
		case verdictValid:
			result.Valid++
		case verdictDecodeFailed:
			result.Invalid++
			result.DecodeFailed++
		case verdictInvalid:
			result.Invalid++
		case verdictPanicked:
			result.Panicked++
		}
	}
	return json.NewEncoder(out).Encode(result)
}

// readConfigs reads every JSON line {"config": YAML} of in; a null config is an error
// (there is nothing to decode).
func readConfigs(in io.Reader) ([][]byte, error) {
	dec := json.NewDecoder(in)
	var configs [][]byte
	for {
		var c struct {
			Config *string `json:"config"`
		}
		if err := dec.Decode(&c); err == io.EOF {
			return configs, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading config %d: %w", len(configs)+1, err)
		}
		if c.Config == nil {
			return nil, fmt.Errorf("config %d: no config", len(configs)+1)
		}
		configs = append(configs, []byte(*c.Config))
	}
}

// decodeDefaultValidate is the kubelet's decode + default + validate of one config file's
// bytes (see benchConfigs).
func decodeDefaultValidate(ctx context.Context, codecs *serializer.CodecFactory, data []byte) (v verdict) {
	defer func() {
		if r := recover(); r != nil {
			v = verdictPanicked
		}
	}()
	// configfiles' fsLoader.Load: an empty file is an error, else the codec.
	if len(data) == 0 {
		return verdictDecodeFailed
	}
	kc, err := utilcodec.DecodeKubeletConfiguration(ctx, codecs, data)
	if err != nil {
		return verdictDecodeFailed
	}
	defaultEvictionHard(kc)
	gates := utilfeature.DefaultMutableFeatureGate.DeepCopy()
	if err := gates.SetFromMap(kc.FeatureGates); err != nil {
		return verdictInvalid
	}
	if err := kubeletconfigvalidation.ValidateKubeletConfiguration(kc, gates); err != nil {
		return verdictInvalid
	}
	return verdictValid
}

// defaultEvictionHard is loadConfigFile's evictionHard step (as in main.go's
// loadConfigFile, which works on a file).
func defaultEvictionHard(kc *kubeletconfiginternal.KubeletConfiguration) {
	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard {
			if _, exists := kc.EvictionHard[k]; !exists {
				kc.EvictionHard[k] = v
			}
		}
	}
}

// peakRSS is this process's peak resident set in bytes (VmHWM), 0 when unknown.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb * 1024
		}
	}
	return 0
}
