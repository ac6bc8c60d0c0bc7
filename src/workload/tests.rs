//! Path shapes as the kernel shows them under systemd, docker, containerd, cri-o,
//! podman and Kubernetes (both cgroup drivers), cgroup v1 and v2.

use super::*;
use crate::format::Delegation;

const ID: &str = "3f2a9c0d1e4b5a6978877665544332211ffeeddccbbaa9988776655443322110";

#[test]
fn v2_system_unit_gives_its_name() {
    let p = cgroup_path("0::/system.slice/nginx.service\n");
    assert_eq!(p, "/system.slice/nginx.service");
    let w = Workload::new(&p, "/usr/sbin/nginx", false);
    assert_eq!(w.unit.as_deref(), Some("nginx.service"));
    assert_eq!(w.container_id, None);
    assert_eq!(w.service("nginx"), "nginx");
}

#[test]
fn v1_prefers_name_systemd_then_unified_then_the_rest() {
    let text =
        "12:memory:/sandbox/abc\n1:name=systemd:/system.slice/cron.service\n0::/other.slice\n";
    assert_eq!(cgroup_path(text), "/system.slice/cron.service");
    let text = "12:memory:/sandbox/abc\n1:name=systemd:/\n0::/system.slice/ssh.service\n";
    assert_eq!(cgroup_path(text), "/system.slice/ssh.service");
    let text = "4:memory:/sandbox/abc\n1:name=systemd:/\n0::/\n";
    assert_eq!(cgroup_path(text), "/sandbox/abc");
    assert_eq!(cgroup_path("1:name=systemd:/\n0::/\n"), "/");
    assert_eq!(cgroup_path(""), "/");
    assert_eq!(cgroup_path("garbage\n\n::\n"), "/");
}

#[test]
fn templated_and_user_units() {
    let w = Workload::new(
        "/system.slice/system-getty.slice/getty@tty1.service",
        "/sbin/agetty",
        false,
    );
    assert_eq!(w.unit.as_deref(), Some("getty@tty1.service"));
    assert_eq!(w.service("agetty"), "getty");
    // A user's own units are hers to name (issue 46): the unit is the one root gave
    // her, the service her executable's, and the workload says whose it is.
    let user = "/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-firefox.service";
    let w = Workload::new(user, "/usr/lib/firefox/firefox", false);
    assert_eq!(w.unit.as_deref(), Some("user@1000.service"));
    assert_eq!(w.service("firefox"), "firefox");
    assert_eq!(
        w.delegated,
        Some(Delegation {
            depth: 3,
            uid: Some(1000)
        })
    );
    // The user's manager itself.
    let w = Workload::new(
        "/user.slice/user-1000.slice/user@1000.service/init.scope",
        "/usr/lib/systemd/systemd",
        false,
    );
    assert_eq!(w.unit.as_deref(), Some("user@1000.service"));
    assert_eq!(w.service("systemd"), "systemd");
}

#[test]
fn a_users_subtree_names_no_service_and_no_container() {
    // What she named `nginx.service` and `docker-ID.scope` below the directory she
    // owns (as read while recording): none of it is read.
    let owned = Some(Delegation {
        depth: 2,
        uid: Some(65534),
    });
    for path in [
        "/test.slice/user@65534.service/nginx.service".to_owned(),
        format!("/test.slice/delegated/docker-{ID}.scope"),
        format!("/test.slice/delegated/kubepods/pod1b4e2f3a-5c6d-4e7f-8a9b-0c1d2e3f4a5b/{ID}"),
    ] {
        let w = Workload::vouched(&path, "/usr/sbin/nginx", false, owned);
        assert_eq!(w.container_id, None, "{path}");
        assert_eq!(w.pod_uid, None, "{path}");
        assert_ne!(w.unit.as_deref(), Some("nginx.service"), "{path}");
        assert_eq!(w.service_unit(), None, "{path}");
        assert_eq!(w.delegated.and_then(|d| d.uid), Some(65534), "{path}");
    }
    // `user@UID.service` in the path is a user's subtree even where the recording
    // says nothing (older recordings): the earlier of the two bounds holds.
    let w = Workload::vouched(
        "/user.slice/user-1000.slice/user@1000.service/a/nginx.service",
        "/x",
        false,
        Some(Delegation {
            depth: 4,
            uid: Some(1000),
        }),
    );
    assert_eq!(w.delegated.map(|d| d.depth), Some(3));
    // Root's own names stay read whole.
    let w = Workload::vouched(
        "/system.slice/nginx.service",
        "/usr/sbin/nginx",
        false,
        None,
    );
    assert_eq!(w.service_unit(), Some("nginx.service"));
    assert_eq!(w.service("nginx"), "nginx");
    // A level that could not be read: only what was read is vouched for.
    let w = Workload::vouched(
        "/system.slice/nginx.service",
        "/usr/sbin/nginx",
        false,
        Some(Delegation {
            depth: 1,
            uid: None,
        }),
    );
    assert_eq!(w.unit, None);
}

#[test]
fn scopes_are_units_but_name_by_executable() {
    let w = Workload::new(
        "/user.slice/user-0.slice/session-3.scope",
        "/usr/bin/bash",
        false,
    );
    assert_eq!(w.unit.as_deref(), Some("session-3.scope"));
    assert_eq!(w.service("bash"), "bash");
    let w = Workload::new(
        "/system.slice/run-r1234abcd.scope",
        "/usr/bin/make (deleted)",
        false,
    );
    assert_eq!(w.service("make"), "make");
}

#[test]
fn docker_paths() {
    for path in [
        format!("/docker/{ID}"),
        format!("/system.slice/docker-{ID}.scope"),
        format!("/system.slice/docker-{}.scope", ID.to_uppercase()),
    ] {
        let w = Workload::new(&path, "/usr/local/bin/python3.12", false);
        assert_eq!(w.container_id.as_deref(), Some(ID), "{path}");
        assert_eq!(w.unit, None, "{path}: a container's scope is not its unit");
        assert_eq!(w.pod_uid, None);
        assert_eq!(w.service("python3"), "python3.12");
    }
    // Not 64 digits: not an id.
    let w = Workload::new("/docker/abc123", "/bin/sh", false);
    assert_eq!(w.container_id, None);
}

#[test]
fn containerd_crio_podman_scopes() {
    for pre in ["cri-containerd-", "crio-", "libpod-"] {
        let w = Workload::new(&format!("/machine.slice/{pre}{ID}.scope"), "/app", false);
        assert_eq!(w.container_id.as_deref(), Some(ID), "{pre}");
    }
    // The runtime's monitor is not the container.
    let w = Workload::new(
        &format!("/machine.slice/libpod-conmon-{ID}.scope"),
        "/usr/bin/conmon",
        false,
    );
    assert_eq!(w.container_id, None);
    assert_eq!(w.service("conmon"), "conmon");
}

#[test]
fn kubernetes_pods_both_drivers() {
    let systemd = format!(
        "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1b4e2f3a_5c6d_4e7f_8a9b_0c1d2e3f4a5b.slice/cri-containerd-{ID}.scope"
    );
    let w = Workload::new(&systemd, "/usr/bin/envoy", false);
    assert_eq!(
        w.pod_uid.as_deref(),
        Some("1b4e2f3a-5c6d-4e7f-8a9b-0c1d2e3f4a5b")
    );
    assert_eq!(w.container_id.as_deref(), Some(ID));
    assert_eq!(w.service("envoy"), "envoy");
    let cgroupfs = format!("/kubepods/besteffort/pod1b4e2f3a-5c6d-4e7f-8a9b-0c1d2e3f4a5b/{ID}");
    let w = Workload::new(&cgroupfs, "/pause", false);
    assert_eq!(
        w.pod_uid.as_deref(),
        Some("1b4e2f3a-5c6d-4e7f-8a9b-0c1d2e3f4a5b")
    );
    assert_eq!(w.container_id.as_deref(), Some(ID));
    // Guaranteed pods sit straight under kubepods.
    let w = Workload::new(
        "/kubepods.slice/kubepods-pod1b4e2f3a_5c6d_4e7f_8a9b_0c1d2e3f4a5b.slice",
        "/x",
        false,
    );
    assert!(w.pod_uid.is_some());
    // `pod` outside kubepods is only a name.
    let w = Workload::new(
        "/system.slice/pod1b4e2f3a-5c6d-4e7f-8a9b-0c1d2e3f4a5b",
        "/x",
        false,
    );
    assert_eq!(w.pod_uid, None);
}

#[test]
fn fallbacks_kernel_threads_and_odd_names() {
    let w = Workload::new("/", "", true);
    assert_eq!(w.service("kworker/0:1"), "kernel");
    let w = Workload::new("/", "", false);
    assert_eq!(w.service("my app!"), "my_app_");
    let w = Workload::new("/system.slice/we{ird}.service", "/x", false);
    assert_eq!(w.service("x"), "we_ird_");
}

#[test]
fn index_gives_the_workload_at_a_time() {
    let ev = |time, pid, cgroup: &str, exe: &str| WorkloadEvent {
        time,
        pid,
        cgroup: cgroup.into(),
        exe: exe.into(),
        kernel: false,
        delegated: None,
    };
    let idx = WorkloadIndex::new(&[
        ev(50, 7, "/system.slice/a.service", "/bin/sh"),
        ev(10, 7, "/", "/bin/bash"),
        ev(5, 8, "/", "/bin/true"),
    ]);
    assert_eq!(
        idx.at(7, 0).unwrap().exe,
        "/bin/bash",
        "before the first: the first"
    );
    assert_eq!(idx.at(7, 49).unwrap().exe, "/bin/bash");
    assert_eq!(idx.at(7, 50).unwrap().service("sh"), "a");
    assert!(idx.changes(7) && !idx.changes(8));
    assert!(idx.at(9, 1).is_none());
}
