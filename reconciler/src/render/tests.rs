use std::time::Duration;

use kubelet_gitops_core::protocol;

use super::*;
use crate::model::{IntOrPercent, Rollout};
use crate::source::MemorySource;

const SETTINGS: &str = "\
apiVersion: kubelet-gitops.io/v1alpha1
kind: RepoSettings
spec:
  namespace: node-config
  keepConfigMaps: 3
  exclude: [\"pools/drafts-*.yaml\"]
  rollout:
    maxUnavailable: 20%
    healthTimeout: 3m
  policy:
    forbiddenPoolFields: [cgroupDriver, featureGates.CPUManagerPolicyOptions]
";

const BASE: &str = "\
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
clusterDNS: [10.96.0.10]
systemReserved:
  cpu: 500m
  memory: 1Gi
";

const GPU: &str = "\
apiVersion: kubelet-gitops.io/v1alpha1
kind: NodePool
metadata:
  name: gpu
spec:
  nodeSelector:
    matchLabels: {node.kubernetes.io/pool: gpu}
  priority: 10
  rollout:
    canary: 2
    lkgGrace: 5m
  kubelet:
    maxPods: 64
    clusterDNS: [10.96.0.53]
    systemReserved:
      memory: 2Gi
";

const GENERAL: &str = "\
apiVersion: kubelet-gitops.io/v1alpha1
kind: NodePool
metadata:
  name: general
spec:
  nodeSelector: {}
";

fn source(files: &[(&str, &str)]) -> MemorySource {
    MemorySource::new(files.iter().map(|(p, b)| (*p, b.as_bytes().to_vec())))
}

fn full() -> Vec<(&'static str, &'static str)> {
    vec![
        ("kubelet-gitops.yaml", SETTINGS),
        ("base/kubelet.yaml", BASE),
        ("pools/gpu.yaml", GPU),
        ("pools/general.yaml", GENERAL),
        ("README.md", "# fleet config\n"),
    ]
}

fn ok(src: &MemorySource) -> RenderedRepo {
    match render_repo(src, &RenderOptions::default()) {
        Ok(r) => r,
        Err(errs) => panic!("errors: {}", lines(&errs)),
    }
}

fn errors_with(src: &MemorySource, opts: &RenderOptions) -> String {
    match render_repo(src, opts) {
        Ok(r) => panic!(
            "rendered without errors: {:?}",
            r.pools.iter().map(|p| &p.spec.name).collect::<Vec<_>>()
        ),
        Err(errs) => lines(&errs),
    }
}

fn errors(src: &MemorySource) -> String {
    errors_with(src, &RenderOptions::default())
}

fn lines(errs: &[RepoError]) -> String {
    errs.iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn with(
    files: &[(&'static str, &'static str)],
    path: &'static str,
    body: &'static str,
) -> MemorySource {
    let mut v: Vec<(&str, &str)> = files.iter().filter(|(p, _)| *p != path).copied().collect();
    v.push((path, body));
    source(&v)
}

fn replaced(text: &str, from: &str, to: &str) -> &'static str {
    assert!(text.contains(from), "{from:?} not in fixture");
    Box::leak(text.replacen(from, to, 1).into_boxed_str())
}

#[test]
fn a_full_repository_renders() {
    let repo = ok(&source(&full()));
    let s = &repo.settings;
    assert_eq!(s.namespace, "node-config");
    assert_eq!(s.keep_configmaps, 3);
    assert_eq!(s.source_path.as_deref(), Some("kubelet-gitops.yaml"));
    assert_eq!(
        s.rollout_defaults.max_unavailable,
        IntOrPercent::Percent(20)
    );
    assert_eq!(s.rollout_defaults.health_timeout, Duration::from_secs(180));
    assert_eq!(
        s.rollout_defaults.canary, 1,
        "unset fields keep the built-in default"
    );
    assert_eq!(s.exclude, vec!["pools/drafts-*.yaml"]);
    assert_eq!(
        s.policy.forbidden_pool_fields,
        vec!["cgroupDriver", "featureGates.CPUManagerPolicyOptions"]
    );

    let names: Vec<&str> = repo.pools.iter().map(|p| p.spec.name.as_str()).collect();
    assert_eq!(names, ["general", "gpu"], "sorted by name");
    let gpu = repo.pool("gpu").unwrap();
    assert_eq!(gpu.spec.source_path, "pools/gpu.yaml");
    assert_eq!(gpu.spec.priority, 10);
    assert_eq!(gpu.spec.selector.to_query(), "node.kubernetes.io/pool=gpu");
    let r = &gpu.spec.rollout;
    assert_eq!(r.canary, 2, "pool overrides the default");
    assert_eq!(r.lkg_grace, Duration::from_secs(300));
    assert_eq!(
        r.max_unavailable,
        IntOrPercent::Percent(20),
        "from the settings"
    );
    assert_eq!(
        r.health_timeout,
        Duration::from_secs(180),
        "from the settings"
    );

    let c = &gpu.config;
    assert_eq!(c.max_pods, Some(64));
    assert_eq!(c.cgroup_driver.as_deref(), Some("systemd"), "from the base");
    assert_eq!(
        c.cluster_dns.as_deref(),
        Some(&["10.96.0.53".to_string()][..]),
        "lists replace"
    );
    let sr = c.system_reserved.as_ref().unwrap();
    assert_eq!(sr["cpu"], "500m", "maps merge: the base's cpu stays");
    assert_eq!(sr["memory"], "2Gi", "the pool's memory wins");
    assert_eq!(c.port, None, "defaults are not baked in");

    assert!(
        gpu.rendered
            .starts_with("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"),
        "{}",
        gpu.rendered
    );
    assert!(!gpu.rendered.contains("port:"), "{}", gpu.rendered);
    assert_eq!(
        gpu.configmap_name,
        protocol::configmap_name("gpu", gpu.rendered.as_bytes())
    );
    assert!(gpu.configmap_name.starts_with("kubelet-gpu-"));

    let general = repo.pool("general").unwrap();
    assert_eq!(general.spec.priority, 0);
    assert_eq!(general.spec.rollout.canary, 1);
    assert_eq!(general.config.max_pods, None);
    assert_eq!(general.config.cgroup_driver.as_deref(), Some("systemd"));
}

#[test]
fn rendering_is_deterministic() {
    let a = ok(&source(&full()));
    let b = ok(&source(&full()));
    assert_eq!(a.pools, b.pools);
    // Same fields, written in another order and style: the same bytes and name.
    let reordered = "\
kind: NodePool
apiVersion: kubelet-gitops.io/v1alpha1
spec:
  kubelet:
    systemReserved: {memory: 2Gi}
    clusterDNS:
      - 10.96.0.53
    maxPods: 64
  rollout: {lkgGrace: 5m, canary: 2}
  priority: 10
  nodeSelector:
    matchLabels:
      node.kubernetes.io/pool: gpu
metadata: {name: gpu}
";
    let c = ok(&with(&full(), "pools/gpu.yaml", reordered));
    assert_eq!(
        a.pool("gpu").unwrap().rendered,
        c.pool("gpu").unwrap().rendered
    );
    assert_eq!(
        a.pool("gpu").unwrap().configmap_name,
        c.pool("gpu").unwrap().configmap_name
    );
    // A real change changes the bytes and the name.
    let d = ok(&with(
        &full(),
        "pools/gpu.yaml",
        replaced(GPU, "maxPods: 64", "maxPods: 65"),
    ));
    assert_ne!(
        a.pool("gpu").unwrap().configmap_name,
        d.pool("gpu").unwrap().configmap_name
    );
}

#[test]
fn the_rendered_yaml_decodes_back_strictly() {
    let repo = ok(&source(&full()));
    for p in &repo.pools {
        let (back, _) =
            kubelet_gitops_core::decode::decode_kubelet_configuration("x", p.rendered.as_bytes())
                .unwrap();
        assert_eq!(back, p.config);
    }
}

#[test]
fn settings_and_base_are_optional() {
    let repo = ok(&source(&[("pools/general.yaml", GENERAL)]));
    assert_eq!(repo.settings, RepoSettings::default());
    assert_eq!(repo.settings.namespace, "kubelet-gitops");
    assert_eq!(repo.settings.keep_configmaps, 5);
    let p = &repo.pools[0];
    assert_eq!(
        p.rendered,
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    );
    assert_eq!(p.spec.rollout, Rollout::default());
    // A repository without pools renders to no pools.
    assert!(ok(&source(&[("README.md", "x")])).pools.is_empty());
}

#[test]
fn a_base_without_type_meta_is_accepted_and_a_wrong_one_is_not() {
    let base = "maxPods: 50\n";
    let repo = ok(&source(&[
        ("base/kubelet.yaml", base),
        ("pools/general.yaml", GENERAL),
    ]));
    assert_eq!(repo.pools[0].config.max_pods, Some(50));
    let bad = "kind: KubeletConfig\nmaxPods: 50\n";
    let e = errors(&source(&[
        ("base/kubelet.yaml", bad),
        ("pools/general.yaml", GENERAL),
    ]));
    assert!(e.starts_with("base/kubelet.yaml:1:"), "{e}");
    assert!(e.contains("kind: kind is \"KubeletConfig\""), "{e}");
}

#[test]
fn a_misspelled_kubelet_field_in_a_pool_names_the_line_and_the_field_meant() {
    let e = errors(&with(
        &full(),
        "pools/gpu.yaml",
        replaced(GPU, "maxPods: 64", "maxPod: 64"),
    ));
    assert!(
        e.contains(
            "pools/gpu.yaml:13:5: spec.kubelet.maxPod: unknown field \"maxPod\" (did you mean `maxPods`?)"
        ),
        "{e}"
    );
}

#[test]
fn a_misspelled_field_in_the_base_or_the_pool_document_is_reported() {
    let e = errors(&with(
        &full(),
        "base/kubelet.yaml",
        replaced(BASE, "systemReserved:", "sytemReserved:"),
    ));
    assert!(
        e.contains("base/kubelet.yaml:5:1: sytemReserved: unknown field \"sytemReserved\" (did you mean `systemReserved`?)"),
        "{e}"
    );
    let e = errors(&with(
        &full(),
        "pools/gpu.yaml",
        replaced(GPU, "  priority: 10", "  priorty: 10"),
    ));
    assert!(
        e.contains(
            "pools/gpu.yaml:8:3: spec.priorty: unknown field \"priorty\" (did you mean `priority`?)"
        ),
        "{e}"
    );
    let e = errors(&with(
        &full(),
        "pools/gpu.yaml",
        replaced(GPU, "    canary: 2", "    canery: 2"),
    ));
    assert!(
        e.contains("spec.rollout.canery: unknown field \"canery\" (did you mean `canary`?)"),
        "{e}"
    );
}

#[test]
fn every_error_of_every_file_is_collected() {
    let mut files = full();
    files.retain(|(p, _)| *p != "pools/gpu.yaml" && *p != "base/kubelet.yaml");
    files.push((
        "base/kubelet.yaml",
        replaced(BASE, "clusterDNS", "clusterDSN"),
    ));
    // Three problems in one pool file: name, selector and rollout.
    let gpu = replaced(GPU, "name: gpu", "name: GPU");
    let gpu = replaced(gpu, "    canary: 2", "    canary: 2\n    maxUnavailable: 0");
    let gpu = replaced(
        gpu,
        "    matchLabels: {node.kubernetes.io/pool: gpu}",
        "    matchExpressions: [{key: zone, operator: In}]",
    );
    files.push(("pools/gpu.yaml", gpu));
    files.push((
        "pools/cpu.yaml",
        "kind: NodePool\napiVersion: kubelet-gitops.io/v1alpha1\nmetadata: {name: cpu}\n",
    ));
    let e = errors(&source(&files));
    for want in [
        "base/kubelet.yaml:4:1: clusterDSN: unknown field",
        "pools/cpu.yaml: spec: spec is required",
        "pools/gpu.yaml:4:3: metadata.name: invalid pool name \"GPU\"",
        "pools/gpu.yaml:7:24: spec.nodeSelector.matchExpressions[0].values: must be specified when `operator` is 'In' or 'NotIn'",
        "spec.rollout.maxUnavailable: must be at least 1",
    ] {
        assert!(e.contains(want), "missing {want:?} in\n{e}");
    }
    let files: Vec<&str> = e.lines().map(|l| l.split(':').next().unwrap()).collect();
    let mut sorted = files.clone();
    sorted.sort();
    assert_eq!(files, sorted, "sorted by file");
}

#[test]
fn pool_names_must_match_the_file_and_fit_a_label() {
    let e = errors(&with(
        &full(),
        "pools/gpu.yaml",
        replaced(GPU, "name: gpu", "name: gpus"),
    ));
    assert!(
        e.contains("pools/gpu.yaml:4:3: metadata.name: metadata.name \"gpus\" must equal the file's name \"gpu\""),
        "{e}"
    );
    let long = "a".repeat(64);
    let body: &'static str = Box::leak(GENERAL.replace("general", &long).into_boxed_str());
    let path: &'static str = Box::leak(format!("pools/{long}.yaml").into_boxed_str());
    let e = errors(&source(&[(path, body)]));
    assert!(e.contains("must be no more than 63 characters"), "{e}");
    let e = errors(&source(&[(
        "pools/general.yaml",
        replaced(GENERAL, "metadata:\n  name: general\n", ""),
    )]));
    assert!(
        e.contains("metadata.name: metadata.name is required"),
        "{e}"
    );
    let body: &'static str = Box::leak(GENERAL.replace("general", "plan").into_boxed_str());
    let e = errors(&source(&[("pools/plan.yaml", body)]));
    assert!(e.contains("the pool name \"plan\" is reserved"), "{e}");
    // 63 characters is fine.
    let ok63 = "b".repeat(63);
    let body: &'static str = Box::leak(GENERAL.replace("general", &ok63).into_boxed_str());
    let path: &'static str = Box::leak(format!("pools/{ok63}.yaml").into_boxed_str());
    assert_eq!(ok(&source(&[(path, body)])).pools.len(), 1);
}

#[test]
fn duplicate_pool_names_are_an_error() {
    let e = errors(&with(&full(), "pools/gpu.yml", GPU));
    assert!(
        e.contains(
            "pools/gpu.yml:4:3: metadata.name: pool \"gpu\" is also defined in pools/gpu.yaml"
        ),
        "{e}"
    );
}

#[test]
fn files_under_pools_must_be_node_pools() {
    let e = errors(&with(
        &full(),
        "pools/notes.yaml",
        "apiVersion: v1\nkind: ConfigMap\n",
    ));
    assert!(
        e.contains("pools/notes.yaml:2:1: kind: kind is \"ConfigMap\", expected \"NodePool\""),
        "{e}"
    );
    let e = errors(&with(&full(), "pools/empty.yaml", "foo: 1\n"));
    assert!(e.contains("pools/empty.yaml: kind is missing"), "{e}");
    // Files that are not YAML are not pools.
    ok(&with(&full(), "pools/README.md", "# pools\n"));
    // A nested YAML file is misplaced.
    let e = errors(&with(&full(), "pools/old/gpu.yaml", GPU));
    assert!(
        e.contains("pools/old/gpu.yaml: pool files live directly in pools/"),
        "{e}"
    );
    // Other YAML in base/ is an error, YAML elsewhere is not config.
    let e = errors(&with(&full(), "base/kubelet.yml", BASE));
    assert!(
        e.contains("base/kubelet.yml: only base/kubelet.yaml is read"),
        "{e}"
    );
    ok(&with(&full(), "docs/example.yaml", "anything: 1\n"));
}

#[test]
fn globs_select_the_files() {
    // The settings exclude drafts; a draft that is not a pool is then harmless.
    ok(&with(&full(), "pools/drafts-new.yaml", "not: a pool\n"));
    // Command-line globs add to the settings'.
    let opts = RenderOptions {
        exclude: vec!["pools/gpu.yaml".into()],
        ..RenderOptions::default()
    };
    let repo = render_repo(&source(&full()), &opts).unwrap();
    assert_eq!(repo.pools.len(), 1);
    assert_eq!(
        repo.settings.exclude,
        vec!["pools/drafts-*.yaml", "pools/gpu.yaml"]
    );
    let opts = RenderOptions {
        include: vec!["pools/general.yaml".into(), "base/*".into()],
        ..RenderOptions::default()
    };
    let repo = render_repo(&source(&full()), &opts).unwrap();
    assert_eq!(repo.pools.len(), 1);
    assert_eq!(
        repo.pools[0].config.cgroup_driver.as_deref(),
        Some("systemd")
    );
    // `*` does not cross directories.
    let opts = RenderOptions {
        include: vec!["*.yaml".into()],
        ..RenderOptions::default()
    };
    assert!(
        render_repo(&source(&full()), &opts)
            .unwrap()
            .pools
            .is_empty()
    );
    // Bad globs are reported where they were written.
    let settings = replaced(
        SETTINGS,
        "[\"pools/drafts-*.yaml\"]",
        "[\"pools/[a.yaml\", /abs]",
    );
    let e = errors(&with(&full(), "kubelet-gitops.yaml", settings));
    assert!(
        e.contains("kubelet-gitops.yaml:6:13: spec.exclude[0]: invalid glob \"pools/[a.yaml\""),
        "{e}"
    );
    assert!(e.contains("spec.exclude[1]: invalid glob \"/abs\""), "{e}");
    let opts = RenderOptions {
        include: vec!["{a".into()],
        ..RenderOptions::default()
    };
    assert!(errors_with(&source(&full()), &opts).contains("--include: invalid glob \"{a\""));
}

/// `kubelet-gitops.yaml` whose `list` holds `count` globs, the first one invalid.
fn settings_with_globs(list: &str, count: usize) -> &'static str {
    let mut out = format!(
        "apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n  {list}:\n    \
         - \"pools/[a.yaml\"\n"
    );
    for i in 1..count {
        out.push_str(&format!("    - \"pools/p{i}*.yaml\"\n"));
    }
    Box::leak(out.into_boxed_str())
}

#[test]
fn more_globs_than_the_limit_are_an_error_before_compiling() {
    for list in ["include", "exclude"] {
        // At the limit the globs are compiled: the bad first one is reported.
        let settings = settings_with_globs(list, MAX_GLOBS);
        let e = errors(&with(&full(), "kubelet-gitops.yaml", settings));
        assert!(
            e.contains(&format!(
                "kubelet-gitops.yaml:5:7: spec.{list}[0]: invalid glob \"pools/[a.yaml\""
            )),
            "{e}"
        );
        // One more: the list is refused where it is written, and nothing is compiled.
        let settings = settings_with_globs(list, MAX_GLOBS + 1);
        let e = errors(&with(&full(), "kubelet-gitops.yaml", settings));
        assert_eq!(
            e,
            format!(
                "kubelet-gitops.yaml:4:3: spec.{list}: {} globs: at most {MAX_GLOBS} are allowed \
                 (a glob set takes time to compile that grows with its size); combine them \
                 with `*`, `**` or `{{a,b}}`, e.g. `pools/*.yaml`",
                MAX_GLOBS + 1
            )
        );
    }
    // The command line's globs, the same: checked with the options alone too.
    let many: Vec<String> = (0..=MAX_GLOBS)
        .map(|i| format!("pools/p{i}*.yaml"))
        .collect();
    let cases = [
        (
            RenderOptions {
                include: many.clone(),
                ..RenderOptions::default()
            },
            "--include",
        ),
        (
            RenderOptions {
                exclude: many.clone(),
                ..RenderOptions::default()
            },
            "--exclude",
        ),
    ];
    for (opts, flag) in cases {
        let expected = format!(
            "{flag}: {} globs: at most {MAX_GLOBS} are allowed",
            MAX_GLOBS + 1
        );
        assert!(
            errors_with(&source(&full()), &opts).starts_with(&expected),
            "{flag}"
        );
        let checked = opts.check().unwrap_err();
        assert_eq!(checked.len(), 1);
        assert!(checked[0].to_string().starts_with(&expected), "{flag}");
    }
    // Exactly the limit on the command line is fine.
    let opts = RenderOptions {
        exclude: many[..MAX_GLOBS].to_vec(),
        ..RenderOptions::default()
    };
    assert!(opts.check().is_ok());
    assert_eq!(render_repo(&source(&full()), &opts).unwrap().pools.len(), 2);
}

#[test]
fn a_glob_longer_than_the_limit_is_an_error() {
    let at_limit = format!("pools/{}", "a".repeat(MAX_GLOB_BYTES - "pools/".len()));
    let over = format!("{at_limit}b");
    let settings = format!(
        "apiVersion: kubelet-gitops.io/v1alpha1\nkind: RepoSettings\nspec:\n  exclude:\n    \
         - \"{at_limit}\"\n    - \"{over}\"\n"
    );
    let e = errors(&with(
        &full(),
        "kubelet-gitops.yaml",
        Box::leak(settings.into_boxed_str()),
    ));
    assert_eq!(
        e,
        format!(
            "kubelet-gitops.yaml:6:7: spec.exclude[1]: a glob of {} bytes: at most \
             {MAX_GLOB_BYTES} are allowed (a glob takes time to compile that grows with its \
             length); shorten it with `*` or `**`",
            MAX_GLOB_BYTES + 1
        )
    );
    let opts = RenderOptions {
        include: vec![over],
        ..RenderOptions::default()
    };
    let checked = opts.check().unwrap_err();
    assert!(
        checked[0].to_string().starts_with(&format!(
            "--include: a glob of {} bytes",
            MAX_GLOB_BYTES + 1
        )),
        "{checked:?}"
    );
    let opts = RenderOptions {
        include: vec![at_limit],
        ..RenderOptions::default()
    };
    assert!(opts.check().is_ok());
}

#[test]
fn errors_are_sorted_by_file_line_column_field_and_message_once_each() {
    let e =
        |file: &str, line: Option<usize>, column: Option<usize>, field: &str, m: &str| RepoError {
            file: file.into(),
            line,
            column,
            field: field.into(),
            message: m.into(),
        };
    let errors = vec![
        e("pools/b.yaml", Some(3), Some(1), "x", "m"),
        e("pools/a.yaml", Some(10), Some(2), "y", "m"),
        e("pools/a.yaml", Some(2), Some(5), "z", "n"),
        e("--include", None, None, "", "bad"),
        e("pools/a.yaml", Some(2), Some(5), "z", "m"),
        e("pools/b.yaml", Some(3), Some(1), "x", "m"),
        e("pools/a.yaml", None, None, "", "whole file"),
        e("pools/a.yaml", Some(2), Some(5), "a", "n"),
        e("base/kubelet.yaml", Some(1), Some(1), "maxPods", "m"),
    ];
    // The plain sort of every field, then dedup: what finish_errors must return.
    let mut expected = errors.clone();
    expected.sort_by(|a, b| {
        (
            &a.file,
            a.line.unwrap_or(0),
            a.column.unwrap_or(0),
            &a.field,
            &a.message,
        )
            .cmp(&(
                &b.file,
                b.line.unwrap_or(0),
                b.column.unwrap_or(0),
                &b.field,
                &b.message,
            ))
    });
    expected.dedup();
    assert_eq!(expected.len(), 8);
    assert_eq!(finish_errors(errors), expected);
}

#[test]
fn symlinks_and_submodules_in_the_tree_are_errors() {
    let mut src = source(&full());
    src.symlinks.push("pools/cpu.yaml".into());
    src.submodules.push("vendor/lib".into());
    let e = errors(&src);
    assert!(e.contains("pools/cpu.yaml: is a symlink"), "{e}");
    assert!(e.contains("vendor/lib: is a git submodule"), "{e}");
    // Excluded paths are not part of the tree.
    let opts = RenderOptions {
        exclude: vec!["pools/cpu.yaml".into(), "vendor/**".into()],
        ..RenderOptions::default()
    };
    assert!(render_repo(&src, &opts).is_ok());
    // The settings file is always read, so it may never be a link.
    let mut src = source(&[("pools/general.yaml", GENERAL)]);
    src.symlinks.push("kubelet-gitops.yaml".into());
    assert!(errors(&src).contains("kubelet-gitops.yaml: is a symlink"));
}

#[test]
fn a_root_directory_holds_the_tree() {
    let files: Vec<(String, &str)> = full()
        .into_iter()
        .map(|(p, b)| (format!("clusters/prod/{p}"), b))
        .chain([("pools/ignored.yaml".to_string(), "not: a pool\n")])
        .collect();
    let src = MemorySource::new(
        files
            .iter()
            .map(|(p, b)| (p.clone(), b.as_bytes().to_vec())),
    );
    for root in ["clusters/prod", "./clusters/prod/", "clusters//prod"] {
        let opts = RenderOptions {
            root: root.into(),
            ..RenderOptions::default()
        };
        let repo = render_repo(&src, &opts).unwrap();
        assert_eq!(repo.pools.len(), 2);
        assert_eq!(
            repo.pools[1].spec.source_path,
            "clusters/prod/pools/gpu.yaml"
        );
        assert_eq!(
            repo.settings.source_path.as_deref(),
            Some("clusters/prod/kubelet-gitops.yaml")
        );
    }
    let root = |r: &str| RenderOptions {
        root: r.into(),
        ..RenderOptions::default()
    };
    assert!(errors_with(&src, &root("../x")).contains("--root: \"../x\" leaves the repository"));
    assert!(errors_with(&src, &root("/etc")).contains("must be a directory relative"));
    assert!(errors_with(&src, &root("clusters/dev")).contains("does not exist in memory"));
    let mut linked = src.clone();
    linked.symlinks.push("clusters".into());
    assert!(errors_with(&linked, &root("clusters/prod")).contains("clusters: is a symlink"));
    // Errors inside the root name the full path.
    let mut bad = src.clone();
    bad.files
        .insert("clusters/prod/pools/x.yaml".into(), b"a: 1\n".to_vec());
    assert!(
        errors_with(&bad, &root("clusters/prod"))
            .contains("clusters/prod/pools/x.yaml: kind is missing")
    );
}

#[test]
fn selector_problems_name_the_field() {
    let gpu = replaced(
        GPU,
        "    matchLabels: {node.kubernetes.io/pool: gpu}",
        "    matchLabels: {\"bad key!\": gpu, pool: \"-x\"}\n    matchExpressions:\n      - {key: zone, operator: Exists, values: [a]}\n      - {key: zone, operator: in, values: [a]}",
    );
    let e = errors(&with(&full(), "pools/gpu.yaml", gpu));
    // Decoding stops at the unknown operator; the other problems need a decodable selector.
    assert!(
        e.contains("spec.nodeSelector.matchExpressions[1].operator: unknown value \"in\", expected one of: In, NotIn, Exists, DoesNotExist (did you mean `In`?)"),
        "{e}"
    );
    let gpu = replaced(
        GPU,
        "    matchLabels: {node.kubernetes.io/pool: gpu}",
        "    matchLabels: {\"bad key!\": gpu, pool: \"-x\"}\n    matchExpressions:\n      - {key: zone, operator: Exists, values: [a]}",
    );
    let e = errors(&with(&full(), "pools/gpu.yaml", gpu));
    assert!(e.contains("pools/gpu.yaml:7:19: spec.nodeSelector.matchLabels.bad key!: invalid label key \"bad key!\""), "{e}");
    assert!(
        e.contains("spec.nodeSelector.matchLabels.pool: invalid label value \"-x\""),
        "{e}"
    );
    assert!(e.contains("pools/gpu.yaml:9:39: spec.nodeSelector.matchExpressions[0].values: may not be specified"), "{e}");
    let e = errors(&source(&[(
        "pools/general.yaml",
        replaced(GENERAL, "  nodeSelector: {}", "  priority: 1"),
    )]));
    assert!(
        e.contains("spec.nodeSelector: spec.nodeSelector is required"),
        "{e}"
    );
}

#[test]
fn rollout_values_are_checked() {
    for (rollout, field, want) in [
        ("maxUnavailable: 0", "maxUnavailable", "must be at least 1"),
        ("maxUnavailable: 0%", "maxUnavailable", "must be at least 1"),
        ("maxUnavailable: 101%", "maxUnavailable", "at most 100%"),
        (
            "maxUnavailable: lots",
            "maxUnavailable",
            "expected a count (3) or a percentage",
        ),
        (
            "maxUnavailable: -1",
            "maxUnavailable",
            "expected a count (3) or a percentage",
        ),
        (
            "healthTimeout: 2 parsecs",
            "healthTimeout",
            "invalid duration \"2 parsecs\"",
        ),
        (
            "healthTimeout: 0s",
            "healthTimeout",
            "must be more than zero",
        ),
        ("lkgGrace: soon", "lkgGrace", "invalid duration \"soon\""),
        ("canary: -1", "canary", "invalid value"),
        ("paused: maybe", "paused", "expected"),
    ] {
        let gpu = replaced(
            GPU,
            "    canary: 2\n    lkgGrace: 5m\n",
            Box::leak(format!("    {rollout}\n").into_boxed_str()),
        );
        let e = errors(&with(&full(), "pools/gpu.yaml", gpu));
        assert!(
            e.contains(&format!("pools/gpu.yaml:10:5: spec.rollout.{field}: ")) && e.contains(want),
            "{rollout}: {e}"
        );
    }
    for (rollout, check) in [
        ("maxUnavailable: 3", IntOrPercent::Int(3)),
        ("maxUnavailable: \"3\"", IntOrPercent::Int(3)),
        ("maxUnavailable: 100%", IntOrPercent::Percent(100)),
    ] {
        let gpu = replaced(
            GPU,
            "    canary: 2\n    lkgGrace: 5m\n",
            Box::leak(format!("    {rollout}\n").into_boxed_str()),
        );
        let repo = ok(&with(&full(), "pools/gpu.yaml", gpu));
        assert_eq!(
            repo.pool("gpu").unwrap().spec.rollout.max_unavailable,
            check
        );
    }
    let gpu = replaced(
        GPU,
        "    canary: 2\n",
        "    healthTimeout: 1h30m\n    paused: true\n    canary: 0\n",
    );
    let r = ok(&with(&full(), "pools/gpu.yaml", gpu))
        .pool("gpu")
        .unwrap()
        .spec
        .rollout
        .clone();
    assert_eq!(r.health_timeout, Duration::from_secs(5400));
    assert!(r.paused);
    assert_eq!(r.canary, 0, "no canary is allowed");
}

#[test]
fn settings_values_are_checked() {
    let s = replaced(SETTINGS, "namespace: node-config", "namespace: Node_Config");
    let s = replaced(s, "keepConfigMaps: 3", "keepConfigMaps: 0");
    let s = replaced(s, "healthTimeout: 3m", "healthTimeout: 3");
    let s = replaced(s, "[cgroupDriver,", "[cgroupDrivr, \"\",");
    let e = errors(&with(&full(), "kubelet-gitops.yaml", s));
    for want in [
        "kubelet-gitops.yaml:4:3: spec.namespace: invalid namespace \"Node_Config\"",
        "kubelet-gitops.yaml:5:3: spec.keepConfigMaps: must be at least 1",
        "kubelet-gitops.yaml:9:5: spec.rollout.healthTimeout: wrong type: expected a string",
        "spec.policy.forbiddenPoolFields[0]: \"cgroupDrivr\" is not a KubeletConfiguration field (did you mean `cgroupDriver`?)",
        "spec.policy.forbiddenPoolFields[1]: invalid field path \"\"",
    ] {
        assert!(e.contains(want), "missing {want:?} in\n{e}");
    }
    let e = errors(&with(
        &full(),
        "kubelet-gitops.yaml",
        replaced(SETTINGS, "kind: RepoSettings", "kind: RepoSetting"),
    ));
    assert!(
        e.contains(
            "kubelet-gitops.yaml:2:1: kind: kind is \"RepoSetting\", expected \"RepoSettings\""
        ),
        "{e}"
    );
    let e = errors(&with(
        &full(),
        "kubelet-gitops.yaml",
        replaced(SETTINGS, "  keepConfigMaps", "  keepConfigmaps"),
    ));
    assert!(e.contains("did you mean `keepConfigMaps`?"), "{e}");
    let e = errors(&with(&full(), "kubelet-gitops.yml", SETTINGS));
    assert!(
        e.contains("kubelet-gitops.yml: the settings file is named kubelet-gitops.yaml"),
        "{e}"
    );
}

#[test]
fn the_policy_forbids_fields_in_pools_but_not_in_the_base() {
    let gpu = replaced(
        GPU,
        "    maxPods: 64",
        "    maxPods: 64\n    cgroupDriver: cgroupfs",
    );
    let e = errors(&with(&full(), "pools/gpu.yaml", gpu));
    assert!(
        e.contains("pools/gpu.yaml:14:5: spec.kubelet.cgroupDriver: pools may not set cgroupDriver: kubelet-gitops.yaml lists it in spec.policy.forbiddenPoolFields"),
        "{e}"
    );
    // A gate: only that gate is forbidden; a null parent would remove it.
    let gpu = replaced(
        GPU,
        "    maxPods: 64",
        "    maxPods: 64\n    featureGates: {CPUManagerPolicyOptions: false}",
    );
    assert!(
        errors(&with(&full(), "pools/gpu.yaml", gpu))
            .contains("spec.kubelet.featureGates.CPUManagerPolicyOptions: pools may not set")
    );
    let gpu = replaced(
        GPU,
        "    maxPods: 64",
        "    maxPods: 64\n    featureGates: {MemoryQoS: true}",
    );
    ok(&with(&full(), "pools/gpu.yaml", gpu));
    let gpu = replaced(
        GPU,
        "    maxPods: 64",
        "    maxPods: 64\n    featureGates: null",
    );
    assert!(errors(&with(&full(), "pools/gpu.yaml", gpu)).contains(
        "spec.kubelet.featureGates: pools may not set featureGates.CPUManagerPolicyOptions"
    ));
}

#[test]
fn null_in_a_pool_removes_a_base_field() {
    let gpu = replaced(
        GPU,
        "    clusterDNS: [10.96.0.53]\n",
        "    clusterDNS: null\n",
    );
    let gpu = replaced(
        gpu,
        "    systemReserved:\n",
        "    systemReserved:\n      cpu: null\n",
    );
    let repo = ok(&with(&full(), "pools/gpu.yaml", gpu));
    let c = &repo.pool("gpu").unwrap().config;
    assert_eq!(c.cluster_dns, None);
    let sr = c.system_reserved.as_ref().unwrap();
    assert!(!sr.contains_key("cpu") && sr["memory"] == "2Gi", "{sr:?}");
}

#[test]
fn validation_errors_point_at_the_file_that_set_the_field() {
    // Set by the pool: the pool's line.
    let gpu = replaced(GPU, "maxPods: 64", "maxPods: -3");
    let e = errors(&with(&full(), "pools/gpu.yaml", gpu));
    assert!(
        e.contains("pools/gpu.yaml:13:5: spec.kubelet.maxPods: invalid configuration: maxPods (--max-pods) -3 must not be a negative number"),
        "{e}"
    );
    // Set by the base: the base's line, once, naming every pool it breaks.
    let base = replaced(
        BASE,
        "cgroupDriver: systemd",
        "cgroupDriver: systemd\nimageGCHighThresholdPercent: 101",
    );
    let e = errors(&with(&full(), "base/kubelet.yaml", base));
    let hits: Vec<&str> = e
        .lines()
        .filter(|l| l.contains("imageGCHighThresholdPercent"))
        .collect();
    assert_eq!(hits.len(), 1, "{e}");
    assert!(
        hits[0].starts_with("base/kubelet.yaml:4:1: imageGCHighThresholdPercent: ")
            && hits[0].ends_with("(in the config of pools general, gpu)"),
        "{e}"
    );
    // The pool wins over the base for the same field.
    let gpu = replaced(
        GPU,
        "maxPods: 64",
        "maxPods: 64\n    imageGCHighThresholdPercent: 101",
    );
    let e = errors(&with(
        &full(),
        "base/kubelet.yaml",
        replaced(
            BASE,
            "cgroupDriver: systemd",
            "imageGCHighThresholdPercent: 101",
        ),
    ));
    assert!(e.contains("(in the config of pools general, gpu)"), "{e}");
    let mut files = full();
    files.retain(|(p, _)| *p != "pools/gpu.yaml");
    files.push(("pools/gpu.yaml", gpu));
    let e = errors(&source(&files));
    assert!(
        e.contains("pools/gpu.yaml:14:5: spec.kubelet.imageGCHighThresholdPercent: "),
        "{e}"
    );
    // A field only the kubelet's default sets: the pool file, without a line.
    let gpu = replaced(GPU, "maxPods: 64", "imageGCHighThresholdPercent: 50");
    let e = errors(&with(&full(), "pools/gpu.yaml", gpu));
    assert!(
        e.contains("pools/gpu.yaml: spec.kubelet.imageGCLowThresholdPercent: invalid configuration: imageGCLowThresholdPercent (--image-gc-low-threshold) 80 must be less than imageGCHighThresholdPercent (--image-gc-high-threshold) 50 (the value is the kubelet's default"),
        "{e}"
    );
}

#[test]
fn repo_error_display_leaves_out_unknown_parts() {
    let e = RepoError {
        file: "pools/gpu.yaml".into(),
        line: Some(3),
        column: Some(5),
        field: "spec.priority".into(),
        message: "bad".into(),
    };
    assert_eq!(e.to_string(), "pools/gpu.yaml:3:5: spec.priority: bad");
    assert_eq!(RepoError::new("f", "", "m").to_string(), "f: m");
    let mut e = RepoError::new("f", "x", "m");
    e.line = Some(2);
    assert_eq!(e.to_string(), "f:2: x: m");
}

#[test]
fn a_source_that_cannot_be_listed_is_one_error() {
    struct Broken;
    impl FileSource for Broken {
        fn describe(&self) -> String {
            "commit abc".into()
        }
        fn entries(&self) -> Result<Vec<crate::source::Entry>, crate::source::SourceError> {
            Err(crate::source::SourceError::Read {
                path: "".into(),
                message: "object missing".into(),
            })
        }
        fn read(&self, _: &str) -> Result<Vec<u8>, crate::source::SourceError> {
            unreachable!()
        }
    }
    let e = render_repo(&Broken, &RenderOptions::default()).unwrap_err();
    assert_eq!(e.len(), 1);
    assert!(e[0].to_string().starts_with("commit abc: "), "{}", e[0]);
}

#[test]
fn a_valid_config_too_large_once_written_out_is_an_error_of_the_pool_not_an_internal_one() {
    // Under 1 MiB as one flow list on one line; over it as the ConfigMap holds it, an item
    // per line.
    let items = vec!["1.1.1.1"; 110_000].join(", ");
    let pool = format!(
        "apiVersion: kubelet-gitops.io/v1alpha1\nkind: NodePool\nmetadata:\n  name: dns\n\
         spec:\n  nodeSelector: {{}}\n  kubelet:\n    clusterDNS: [{items}]\n"
    );
    assert!(pool.len() < kubelet_gitops_core::decode::MAX_FILE_BYTES);
    let got = errors(&source(&[("pools/dns.yaml", &pool)]));
    assert!(
        got.starts_with("pools/dns.yaml: spec.kubelet: the config of this pool, merged over the base and written out as the ConfigMap holds it, is ")
            && got.contains("more than the 1048576 bytes (1 MiB) a ConfigMap holds")
            && !got.contains("internal error"),
        "{got}"
    );
}

/// A revision that changes one pool renders that pool only; what comes out is what a
/// render from scratch gives, errors included.
#[test]
fn the_cache_renders_only_what_changed() {
    let mut cache = RenderCache::default();
    let opts = RenderOptions::default();
    let render = |files: &[(&str, &str)], cache: &mut RenderCache| {
        let src = source(files);
        let cached = render_repo_cached(&src, &opts, cache);
        let fresh = render_repo(&src, &opts);
        assert_eq!(
            cached.as_ref().map_err(|e| lines(e)),
            fresh.as_ref().map_err(|e| lines(e)),
            "cached and fresh renders agree"
        );
        cached
    };
    render(&full(), &mut cache).expect("renders");
    assert_eq!(
        cache.last_render(),
        (2, 0),
        "first revision: every pool rendered"
    );

    let gpu2 = GPU.replace("maxPods: 64", "maxPods: 80");
    let mut files = full();
    files[2] = ("pools/gpu.yaml", gpu2.as_str());
    render(&files, &mut cache).expect("renders");
    assert_eq!(cache.last_render(), (1, 1), "only gpu rendered again");

    // The base changes: every pool depends on it.
    let base2 = BASE.replace("10.96.0.10", "10.96.0.11");
    files[1] = ("base/kubelet.yaml", base2.as_str());
    render(&files, &mut cache).expect("renders");
    assert_eq!(cache.last_render(), (2, 0));

    // A copy of a cached pool under another file name: the duplicate is found, with its
    // line, exactly as without the cache; the cache keeps the last good revision.
    files.push(("pools/gpu-copy.yaml", gpu2.as_str()));
    assert!(render(&files, &mut cache).is_err());
    assert_eq!(cache.last_render(), (2, 0));
    files.pop();
    render(&files, &mut cache).expect("renders");
    assert_eq!(
        cache.last_render(),
        (0, 2),
        "nothing changed since the last good one"
    );
}

const DISRUPTION_SETTINGS: &str = "\
apiVersion: kubelet-gitops.io/v1alpha1
kind: RepoSettings
spec:
  disruption:
    classes:
      evictionHard: drain
      cpuManagerPolicy: restart-clear-state
";

#[test]
fn disruption_classes_of_the_settings_and_a_pool_are_decoded() {
    use kubelet_gitops_core::disruption::{Class, class_of};
    let gpu = format!(
        "{GPU}  disruption:\n    classes:\n      evictionHard: restart\n      featureGates.MemoryQoS: drain\n"
    );
    let r = ok(&source(&[
        ("kubelet-gitops.yaml", DISRUPTION_SETTINGS),
        ("pools/gpu.yaml", &gpu),
        ("pools/general.yaml", GENERAL),
    ]));
    let classes: Vec<(String, Class, String)> = r
        .settings
        .disruption
        .iter()
        .map(|(f, c, s)| (f.to_string(), c, s.file.clone()))
        .collect();
    assert_eq!(
        classes,
        [
            (
                "cpuManagerPolicy".to_string(),
                Class::RestartClearState,
                "kubelet-gitops.yaml".to_string()
            ),
            (
                "evictionHard".to_string(),
                Class::Drain,
                "kubelet-gitops.yaml".to_string()
            ),
        ]
    );
    // The general pool has the settings' classes; gpu its own over them.
    let general = &r.pool("general").unwrap().disruption;
    assert_eq!(
        class_of("evictionHard.memory.available", general).0,
        Class::Drain
    );
    let gpu = &r.pool("gpu").unwrap().disruption;
    assert_eq!(
        class_of("evictionHard.memory.available", gpu).0,
        Class::Restart
    );
    assert_eq!(class_of("featureGates.MemoryQoS", gpu).0, Class::Drain);
    assert_eq!(
        class_of("cpuManagerPolicy", gpu).0,
        Class::RestartClearState
    );
    // Without any, the pools have none (and the built-in classes apply).
    assert!(
        ok(&source(&full()))
            .pool("gpu")
            .unwrap()
            .disruption
            .is_empty()
    );
}

#[test]
fn a_bad_disruption_class_names_the_file_line_and_field() {
    let s = "\
apiVersion: kubelet-gitops.io/v1alpha1
kind: RepoSettings
spec:
  disruption:
    classes:
      evictonHard: drain
      maxPods: drian
      cpuManagerPolicy: restart
      systemReserved: restart
      topologyManagerPolicy: restart
";
    let e = errors(&source(&[
        ("kubelet-gitops.yaml", s),
        ("pools/general.yaml", GENERAL),
    ]));
    for want in [
        "kubelet-gitops.yaml:6:7: spec.disruption.classes.evictonHard: \"evictonHard\" is not a KubeletConfiguration field (did you mean `evictionHard`?)",
        "kubelet-gitops.yaml:7:7: spec.disruption.classes.maxPods: unknown disruption class \"drian\" (did you mean `drain`?): expected one of `restart`, `restart-clear-state`, `drain`",
        "kubelet-gitops.yaml:8:7: spec.disruption.classes.cpuManagerPolicy: cpuManagerPolicy cannot be `restart`: a change of cpuManagerPolicy makes the kubelet's CPU or memory manager state file stale",
        "kubelet-gitops.yaml:9:7: spec.disruption.classes.systemReserved: systemReserved cannot be `restart`: a change of systemReserved.cpu makes",
    ] {
        assert!(e.contains(want), "missing {want:?} in\n{e}");
    }
    // The topology manager keeps no state file: a restart is allowed.
    assert!(!e.contains("topologyManagerPolicy"), "{e}");
    assert_eq!(e.lines().count(), 4, "{e}");

    // In a pool file, and an unknown key under spec.disruption.
    let gpu = format!("{GPU}  disruption:\n    clases: {{maxPods: drain}}\n");
    let e = errors(&source(&[("pools/gpu.yaml", &gpu)]));
    assert!(
        e.contains("pools/gpu.yaml:18:5: spec.disruption.clases: unknown field \"clases\"")
            && e.contains("did you mean `classes`?"),
        "{e}"
    );
    let gpu = format!("{GPU}  disruption:\n    classes:\n      reservedMemory: 3\n");
    let e = errors(&source(&[("pools/gpu.yaml", &gpu)]));
    assert!(
        e.contains("pools/gpu.yaml:19:7: spec.disruption.classes.reservedMemory: wrong type"),
        "{e}"
    );
}

const WINDOWED: &str = "\
apiVersion: kubelet-gitops.io/v1alpha1
kind: NodePool
metadata:
  name: gpu
spec:
  nodeSelector:
    matchLabels: {node.kubernetes.io/pool: gpu}
  rollout:
    maintenance:
      appliesTo: all
      windows:
        - days: [Sat, Sun]
          start: \"22:00\"
          duration: 6h
          timeZone: Europe/Berlin
        - {days: [Mon-Fri], start: \"02:00\", duration: 1h}
    waves:
      by: topology.kubernetes.io/zone
      soak: 10m
      jitter: 30s
";

#[test]
fn maintenance_windows_and_waves_render() {
    use crate::rollout::window::AppliesTo;
    let repo = ok(&with(&full(), "pools/gpu.yaml", WINDOWED));
    let gpu = repo.pools.iter().find(|p| p.spec.name == "gpu").unwrap();
    let m = gpu.spec.rollout.maintenance.as_ref().unwrap();
    assert_eq!(m.applies_to, AppliesTo::All);
    let shown: Vec<String> = m.windows.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "Sat,Sun 22:00 Europe/Berlin for 6h",
            "Mon,Tue,Wed,Thu,Fri 02:00 UTC for 1h"
        ]
    );
    let w = gpu.spec.rollout.waves.as_ref().unwrap();
    assert_eq!(w.by, "topology.kubernetes.io/zone");
    assert_eq!(w.soak, Duration::from_secs(600));
    assert_eq!(w.jitter, Duration::from_secs(30));
    // The settings' windows are every pool's default; a pool's own replace them.
    let settings = replaced(
        SETTINGS,
        "    healthTimeout: 3m\n",
        "    healthTimeout: 3m\n    maintenance:\n      windows: [{days: [Tue], start: \"02:00\", duration: 2h}]\n    waves: {}\n",
    );
    let repo = ok(&with(&full(), "kubelet-gitops.yaml", settings));
    let general = repo
        .pools
        .iter()
        .find(|p| p.spec.name == "general")
        .unwrap();
    let m = general.spec.rollout.maintenance.as_ref().unwrap();
    assert_eq!(m.applies_to, AppliesTo::Drain, "the default");
    assert_eq!(m.windows[0].to_string(), "Tue 02:00 UTC for 2h");
    assert_eq!(
        general.spec.rollout.waves.as_ref().unwrap().by,
        "topology.kubernetes.io/zone",
        "the default label"
    );
}

#[test]
fn bad_windows_and_waves_are_errors_at_their_line() {
    let mut failures = Vec::new();
    for (from, to, want) in [
        (
            "[Sat, Sun]",
            "[Sat, Sunday, Caturday]",
            "pools/gpu.yaml:12:31: spec.rollout.maintenance.windows[0].days[2]: unknown day \"Caturday\"",
        ),
        (
            "[Sat, Sun]",
            "[]",
            "pools/gpu.yaml:12:11: spec.rollout.maintenance.windows[0].days: no day",
        ),
        (
            "\"22:00\"",
            "\"24:00\"",
            "pools/gpu.yaml:13:11: spec.rollout.maintenance.windows[0].start: invalid start time \"24:00\"",
        ),
        (
            "duration: 6h",
            "duration: 8d",
            "pools/gpu.yaml:14:11: spec.rollout.maintenance.windows[0].duration: invalid duration \"8d\": a window lasts at most 7 days",
        ),
        (
            "duration: 6h",
            "duration: 0s",
            "spec.rollout.maintenance.windows[0].duration: invalid duration \"0s\": must be more than zero",
        ),
        (
            "Europe/Berlin",
            "Europe/Berln",
            "pools/gpu.yaml:15:11: spec.rollout.maintenance.windows[0].timeZone: unknown time zone \"Europe/Berln\"",
        ),
        (
            "appliesTo: all",
            "appliesTo: everything",
            "pools/gpu.yaml:10:7: spec.rollout.maintenance.appliesTo: invalid value \"everything\"",
        ),
        (
            "timeZone: Europe/Berlin",
            "timezone: Europe/Berlin",
            "spec.rollout.maintenance.windows[0].timezone: unknown field \"timezone\"",
        ),
        (
            "          start: \"22:00\"\n",
            "",
            "spec.rollout.maintenance.windows[0].start: start is required in a window",
        ),
        (
            "soak: 10m",
            "soak: ten minutes",
            "pools/gpu.yaml:19:7: spec.rollout.waves.soak: invalid duration \"ten minutes\"",
        ),
        (
            "jitter: 30s",
            "jitter: 2h",
            "spec.rollout.waves.jitter: invalid duration \"2h\": jitter is at most 1h",
        ),
        (
            "by: topology.kubernetes.io/zone",
            "by: \"bad key!\"",
            "spec.rollout.waves.by: invalid label key \"bad key!\"",
        ),
    ] {
        let e = errors(&with(
            &full(),
            "pools/gpu.yaml",
            replaced(WINDOWED, from, to),
        ));
        if !e.contains(want) {
            failures.push(format!("{to}: {e}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Unquoted, a start time is a string all the same.
    let unquoted = replaced(WINDOWED, "start: \"22:00\"", "start: 22:00");
    let repo = ok(&with(&full(), "pools/gpu.yaml", unquoted));
    let gpu = repo.pools.iter().find(|p| p.spec.name == "gpu").unwrap();
    let m = gpu.spec.rollout.maintenance.as_ref().unwrap();
    assert_eq!(
        m.windows[0].to_string(),
        "Sat,Sun 22:00 Europe/Berlin for 6h"
    );
    let empty = replaced(
        WINDOWED,
        "      windows:\n        - days: [Sat, Sun]\n          start: \"22:00\"\n          duration: 6h\n          timeZone: Europe/Berlin\n        - {days: [Mon-Fri], start: \"02:00\", duration: 1h}\n",
        "      windows: []\n",
    );
    let e = errors(&with(&full(), "pools/gpu.yaml", empty));
    assert!(
        e.contains(
            "pools/gpu.yaml:11:7: spec.rollout.maintenance.windows: at least one window is required"
        ),
        "{e}"
    );
}
