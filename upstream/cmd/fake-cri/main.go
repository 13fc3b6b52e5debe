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
// One thing differs from the fake: a container's status reports its log path as a real
// runtime does, the sandbox's log directory joined with the container's log path (see
// logPathRuntime). The fake leaves it empty, and the kubelet then removed every file of
// its working directory whenever a container went.
//
// It runs until SIGTERM or SIGINT, then removes its socket.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
	"k8s.io/cri-client/pkg/util"
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
	// The fake's own Start would serve the fake itself; this serves logPathRuntime in
	// its place, and is otherwise what Start does.
	server := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(server, logPathRuntime{runtime})
	runtimeapi.RegisterImageServiceServer(server, runtime)
	listener, err := util.CreateListener("unix://" + *socket)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", *socket, err)
	}
	go func() { _ = server.Serve(listener) }()
	runtime.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{
		Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		},
	}
	fmt.Fprintf(os.Stderr, "fake-cri: serving on unix://%s (cgroup driver reported: %q)\n", *socket, *driver)

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	sig := <-signals
	server.Stop()
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

// logPathRuntime is upstream's fake runtime service, except that a container's status
// reports the log path a real runtime reports: the sandbox's log directory joined with
// the container's log path, which CRI defines relative to it. The fake leaves the path
// empty, and when a container is removed the kubelet's log manager removes every match
// of the path followed by "*" (pkg/kubelet/logs, containerLogManager.Clean): with an
// empty path, every file of the kubelet's working directory.
type logPathRuntime struct {
	*fake.RemoteRuntime
}

// CreateContainer creates the container as the fake does, then records its log path.
func (r logPathRuntime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil {
		return nil, err
	}
	logPath := req.GetConfig().GetLogPath()
	if dir := req.GetSandboxConfig().GetLogDirectory(); dir != "" && logPath != "" {
		logPath = filepath.Join(dir, logPath)
	}
	svc := r.RuntimeService
	svc.Lock()
	defer svc.Unlock()
	if c, ok := svc.Containers[resp.GetContainerId()]; ok {
		c.LogPath = logPath
	}
	return resp, nil
}
