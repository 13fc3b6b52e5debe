// Command fake-cri serves a fake container runtime (CRI runtime and image services) on a
// unix socket, so that a real kubelet runs without containerd, images or a network: the
// runtime and the network report ready, pods "run" in memory. It is upstream's own test
// fake (k8s.io/cri-client/pkg/fake, the one kubemark uses), wrapped in a process. Its
// containers start from any image (each "pulled" image has an id and a size), never
// exit, and are Ready without probes.
//
// What the kubelet learns of the cgroup driver is chosen with --cgroup-driver:
//
//   - "" (the default): RuntimeConfig answers with no Linux configuration, and a v1.36
//     kubelet keeps the cgroupDriver of its config file;
//   - "systemd" or "cgroupfs": RuntimeConfig reports that driver, and a v1.36 kubelet
//     uses it whatever its config says (cmd/kubelet/app/server.go,
//     getCgroupDriverFromCRI), as with containerd 2.x or CRI-O 1.28+.
//
// It runs until SIGTERM or SIGINT, then removes its socket.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "fake-cri: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("fake-cri", flag.ContinueOnError)
	socket := fs.String("socket", "", "the unix socket to serve on (a path; required)")
	driver := fs.String("cgroup-driver", "", `the cgroup driver RuntimeConfig reports: "systemd", "cgroupfs", or "" for none`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *socket == "" {
		return fmt.Errorf("--socket is required")
	}
	linux, err := linuxConfig(*driver)
	if err != nil {
		return err
	}
	// A socket left by an earlier run that was killed would make the listen fail.
	if err := os.Remove(*socket); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the old socket %s: %w", *socket, err)
	}

	runtime := fake.NewFakeRemoteRuntime()
	runtime.RuntimeService.FakeLinuxConfiguration = linux
	// An image "pulled" by the fake has size 0 unless set, and a v1.36 kubelet refuses to
	// start a container from an image without an id and a size ("Id or size of image ...
	// is not set"): the pods of the drain tests would never run.
	runtime.ImageService.SetFakeImageSize(1 << 20)
	if err := runtime.Start("unix://" + *socket); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "fake-cri: serving on unix://%s (cgroup driver reported: %q)\n", *socket, *driver)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	sig := <-signals
	runtime.Stop()
	if err := os.Remove(*socket); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing the socket %s: %w", *socket, err)
	}
	fmt.Fprintf(os.Stderr, "fake-cri: stopped on %v\n", sig)
	return nil
}

// linuxConfig is what RuntimeConfig answers for the driver named.
func linuxConfig(driver string) (*runtimeapi.LinuxRuntimeConfiguration, error) {
	switch driver {
	case "":
		return nil, nil
	case "systemd":
		return &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}, nil
	case "cgroupfs":
		return &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_CGROUPFS}, nil
	default:
		return nil, fmt.Errorf(`--cgroup-driver: %q is not "systemd", "cgroupfs" or ""`, driver)
	}
}
