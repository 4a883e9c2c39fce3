//! The Kubernetes example (`deploy/kubernetes/`): every manifest passes a
//! strict check against Kubernetes's own schemas (`kubernetes-validate`,
//! from PyPI, which bundles them: no cluster needed), and its ConfigMap
//! holds the shipped spider as it is.

use std::process::Command;

use crawlworker_testkit::{files, root, stderr, stdout};

#[test]
fn the_kubernetes_manifests_pass_a_strict_schema_check() {
    let manifests = files(&root().join("deploy/kubernetes"), "yaml");
    assert!(manifests.len() >= 4, "{manifests:?}");
    let out = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict"])
        .args(&manifests)
        .output()
        .unwrap_or_else(|e| panic!("cannot run python3 ({e}): scripts/test needs CPython 3"));
    assert!(
        out.status.success(),
        "kubernetes-validate (scripts/test installs it: pip install kubernetes-validate):\n{}{}",
        stdout(&out),
        stderr(&out)
    );
    for kind in [
        "deployment/crawlworker",
        "configmap/crawlworker-spiders",
        "horizontalpodautoscaler/crawlworker",
        "secret/crawlworker-redis",
    ] {
        assert!(
            stdout(&out).contains(&format!("passed for resource {kind}")),
            "{kind} was not checked:\n{}{}",
            stdout(&out),
            stderr(&out)
        );
    }
}

#[test]
fn the_kubernetes_config_map_holds_the_shipped_spider() {
    let manifest = std::fs::read_to_string(root().join("deploy/kubernetes/spiders.yaml"))
        .unwrap_or_else(|e| panic!("cannot read deploy/kubernetes/spiders.yaml: {e}"));
    // The block scalar after `bbs.toml: |`, four spaces in.
    let block: String = manifest
        .lines()
        .skip_while(|l| l.trim() != "bbs.toml: |")
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .map(|l| format!("{}\n", l.strip_prefix("    ").unwrap_or(l)))
        .collect();
    let spider = std::fs::read_to_string(root().join("spiders/bbs.toml"))
        .unwrap_or_else(|e| panic!("cannot read spiders/bbs.toml: {e}"));
    assert!(
        block == spider,
        "deploy/kubernetes/spiders.yaml holds another bbs.toml than spiders/: make it again (kubectl create configmap, as its header says)"
    );
}
