//! [`ConfigFileWatch`]: reads the kubelets' config files over and over on a thread of
//! its own, and records every read that is not a complete, valid KubeletConfiguration.
//! The agent writes them atomically, so no read may ever see a partial file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use kubelet_gitops_core::decode::decode_kubelet_configuration;

/// What the watch saw.
#[derive(Debug, Clone, Default)]
pub struct FileReport {
    /// Reads made (of all files together).
    pub reads: u64,
    /// Distinct file contents seen, per file (how many versions the reads caught).
    pub versions: Vec<(PathBuf, usize)>,
    /// The first failures: `<file>: <why>`.
    pub failures: Vec<String>,
    /// Failures in all.
    pub failure_count: u64,
}

/// Reads each file every couple of milliseconds until stopped.
#[derive(Debug)]
pub struct ConfigFileWatch {
    stop: Arc<AtomicBool>,
    report: Arc<Mutex<FileReport>>,
    thread: Option<JoinHandle<()>>,
}

impl ConfigFileWatch {
    /// Starts reading `files`.
    pub fn start(files: Vec<PathBuf>) -> ConfigFileWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let report = Arc::new(Mutex::new(FileReport::default()));
        let thread = {
            let stop = stop.clone();
            let report = report.clone();
            std::thread::spawn(move || watch(files, &stop, &report))
        };
        ConfigFileWatch {
            stop,
            report,
            thread: Some(thread),
        }
    }

    /// Stops reading and returns what was seen.
    pub fn finish(mut self) -> FileReport {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.report
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl Drop for ConfigFileWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn watch(files: Vec<PathBuf>, stop: &AtomicBool, report: &Mutex<FileReport>) {
    let mut seen: Vec<std::collections::HashSet<Vec<u8>>> = vec![Default::default(); files.len()];
    while !stop.load(Ordering::Relaxed) {
        for (i, path) in files.iter().enumerate() {
            let outcome = match std::fs::read(path) {
                Ok(bytes) => {
                    let name = path.display().to_string();
                    let decoded = decode_kubelet_configuration(&name, &bytes)
                        .map(|_| ())
                        .map_err(|e| e.to_string());
                    seen[i].insert(bytes);
                    decoded
                }
                Err(e) => Err(format!("cannot read: {e}")),
            };
            let mut r = report.lock().unwrap_or_else(|e| e.into_inner());
            r.reads += 1;
            if let Err(why) = outcome {
                r.failure_count += 1;
                if r.failures.len() < 10 {
                    r.failures.push(format!("{}: {why}", path.display()));
                }
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    let mut r = report.lock().unwrap_or_else(|e| e.into_inner());
    r.versions = files
        .into_iter()
        .zip(seen.iter().map(|s| s.len()))
        .collect();
}
