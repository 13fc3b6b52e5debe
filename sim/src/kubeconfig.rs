//! Writes a kubeconfig that points kubectl and kube-rs at the sim.
//!
//! One cluster, one user with a bearer token (the sim accepts any Authorization header,
//! or none), one context named [`CONTEXT_NAME`], set as current. The file is written
//! atomically (temp file in the same directory, fsync, rename) with mode 0600, as
//! kubectl warns about group- or world-readable kubeconfigs.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

/// Name of the context, cluster and user in the written kubeconfig.
pub const CONTEXT_NAME: &str = "kubelet-gitops-sim";

/// The token the kubeconfig's user presents; the sim does not check it.
pub const TOKEN: &str = "kubelet-gitops-sim-token";

/// The kubeconfig YAML for a server at `server_url` (e.g. `http://127.0.0.1:40123`).
pub fn render(server_url: &str) -> String {
    // Every value is double-quoted; JSON string escaping is valid YAML double-quoting.
    let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: {name}\n  \
           cluster:\n    \
             server: {server}\n\
         users:\n\
         - name: {name}\n  \
           user:\n    \
             token: {token}\n\
         contexts:\n\
         - name: {name}\n  \
           context:\n    \
             cluster: {name}\n    \
             user: {name}\n    \
             namespace: default\n\
         current-context: {name}\n\
         preferences: {{}}\n",
        name = q(CONTEXT_NAME),
        server = q(server_url),
        token = q(TOKEN),
    )
}

/// Writes the kubeconfig for `server_url` to `path`, mode 0600, atomically.
pub fn write(path: &Path, server_url: &str) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let file_name = path.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("kubeconfig path {} has no file name", path.display()),
        )
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    tmp_name.push(format!(".tmp-{}", std::process::id()));
    let tmp = dir.join(tmp_name);
    let result = (|| {
        let mut options = fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp)?;
        file.write_all(render(server_url).as_bytes())?;
        file.sync_all()?;
        drop(file);
        fs::rename(&tmp, path)?;
        if let Ok(d) = fs::File::open(dir) {
            // Best effort: some filesystems refuse fsync on a directory.
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_parseable_yaml_with_server_and_context() {
        let yaml = render("http://127.0.0.1:4321");
        let v: serde_json::Value = serde_saphyr::from_str(&yaml).expect("valid YAML");
        assert_eq!(v["current-context"], CONTEXT_NAME);
        assert_eq!(
            v["clusters"][0]["cluster"]["server"],
            "http://127.0.0.1:4321"
        );
        assert_eq!(v["users"][0]["user"]["token"], TOKEN);
        assert_eq!(v["contexts"][0]["context"]["cluster"], CONTEXT_NAME);
        assert_eq!(v["contexts"][0]["context"]["user"], CONTEXT_NAME);
    }

    #[test]
    fn writes_file_mode_0600_and_replaces() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("kubeconfig");
        write(&path, "http://127.0.0.1:1").expect("write");
        write(&path, "http://127.0.0.1:2").expect("rewrite");
        let text = fs::read_to_string(&path).expect("read");
        assert!(text.contains("http://127.0.0.1:2"));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(&path).expect("stat").permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        assert_eq!(
            fs::read_dir(dir.path()).expect("ls").count(),
            1,
            "temp file left behind"
        );
    }

    #[test]
    fn path_without_file_name_is_an_error() {
        assert!(write(Path::new("/"), "http://x").is_err());
    }
}
