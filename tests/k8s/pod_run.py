#!/usr/bin/env python3
"""tests/k8s/pod_run.py: the "no-cluster pod run" of deploy/k8s (issue 19), in `make check-long`.

The image (localhost/dapo:latest, `make image`) is unpacked (deploy/docker/unpack-image.sh) and every workload of
the cpu overlay is started as a "pod" without a kubelet:
- its own network namespace on a bridge, with an /etc/hosts in which the Service names (dapo-coordinator,
  dapo-learner-0.dapo-learner) resolve to the pods' addresses;
- its own mount namespace: the image's root filesystem read-only (readOnlyRootFilesystem); the ConfigMap and
  Secret files as the rendered manifest gives them (items, modes, fsGroup); emptyDirs; one host directory as the PVC,
  shared by every pod;
- its init containers first, then the container's command, args and env from the manifest, in the image's
  environment, chrooted, as the pod's user (runAsUser / runAsGroup / fsGroup).
The coordinator's args get four overrides so that the run is short: trainer.total_training_steps, save_freq,
test_freq and val_before_train. Then:
1. the tiny default trains;
2. the rollout pod is killed (SIGKILL) and replaced by a pod of the same name, which registers again and works;
   then a second rollout pod joins the live run (as `kubectl scale` would start it);
3. the coordinator pod is stopped (SIGTERM, as a rollout of a new version does) and started again: it resumes from
   the checkpoint on the run volume, and the run finishes with every group accounted for.
The workers' liveness files are fresh. Needs root, `ip`, buildah (`make image`); prints SKIP without them.
SEED_RUN_DIR=runs/default puts make run's prepared data and base model on the run volume first: the prepare init
container finds them and skips its SFT (minutes), as it does when a coordinator pod restarts. KEEP=1 keeps the
scratch directory (the pods' logs).
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import check_manifests as cm  # noqa: E402  (render, materialize, secrets)

ROOT, BUILD = cm.ROOT, cm.BUILD
IMAGE = os.environ.get("DAPO_IMAGE", "localhost/dapo:latest")
STEPS = 6
NET = "10.%d.0" % (64 + os.getpid() % 128)
TAG = "dp%d" % (os.getpid() % 100000)


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode:
        cm.fail("%s: exit %d\n%s%s" % (cmd, r.returncode, r.stdout, r.stderr))
    return r.stdout


def log(msg):
    print("pod_run: " + msg, flush=True)


class Pods:
    def __init__(self, scratch, rootfs, image_env, objs):
        self.scratch, self.rootfs, self.image_env, self.objs = scratch, rootfs, image_env, objs
        self.procs, self.addr, self.n, self.specs, self.restarts = {}, {}, 0, {}, {}
        self.pvc = os.path.join(scratch, "pvc")
        os.makedirs(self.pvc)
        os.chown(self.pvc, 10001, 10001)
        sh("ip netns add %sh && ip -n %sh link add br0 type bridge && ip -n %sh link set br0 up" % ((TAG,) * 3))

    def netns(self, pod_name):
        """A network namespace per pod name, on the bridge (made once: a replaced pod gets its address back)."""
        if pod_name in self.addr:
            return "%s%d" % (TAG, self.addr[pod_name][1])
        self.n += 1
        ns, veth, ip = "%s%d" % (TAG, self.n), "%sv%d" % (TAG, self.n), "%s.%d" % (NET, self.n + 1)
        sh("ip netns add %s && ip -n %s link set lo up && ip link add %s type veth peer name eth0 netns %s && "
           "ip link set %s netns %sh && ip -n %sh link set %s master br0 up && ip -n %s addr add %s/24 dev eth0 && "
           "ip -n %s link set eth0 up" % (ns, ns, veth, ns, veth, TAG, TAG, veth, ns, ip, ns))
        self.addr[pod_name] = (ip, self.n)
        return ns

    def hosts(self):
        """/etc/hosts as a cluster's DNS would answer: Service names -> the pods behind them."""
        path = os.path.join(self.scratch, "hosts")
        lines = ["127.0.0.1 localhost"]
        for pod, (ip, _) in self.addr.items():
            lines.append("%s %s" % (ip, pod))
            if pod.startswith("dapo-coordinator"):
                lines.append("%s dapo-coordinator" % ip)
            if pod.startswith("dapo-learner-"):
                lines.append("%s %s.dapo-learner" % (ip, pod))
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.chmod(path, 0o644)
        return path

    def start(self, pod_name, pod, container, extra_args=(), wait=False):
        """Runs one container of `pod` as pod `pod_name`. wait: run to completion (an init container)."""
        ns = self.netns(pod_name)
        vols = cm.materialize(pod, self.objs, tempfile.mkdtemp(dir=self.scratch))
        vols.update({v["name"]: self.pvc for v in pod.get("volumes", []) if "persistentVolumeClaim" in v})
        r = self.rootfs
        mnt = ["set -e", "mount --bind %s %s" % (r, r), "mount -o remount,bind,ro %s" % r,
               "mount -t proc proc %s/proc" % r, "mount --rbind /dev %s/dev" % r, "mount --rbind /sys %s/sys" % r,
               "mount --bind %s %s/etc/hosts" % (self.hosts(), r)]
        for m in sorted(container.get("volumeMounts", []), key=lambda m: m["mountPath"]):
            ro = ",ro" if m.get("readOnly") else ""
            mnt.append("mount --bind %s %s%s" % (vols[m["name"]], r, m["mountPath"]))
            if ro:
                mnt.append("mount -o remount,bind%s %s%s" % (ro, r, m["mountPath"]))
        sc = pod["securityContext"]
        env = dict(self.image_env)
        env.update(cm.container_env(container, pod_name))
        env["HOSTNAME"] = pod_name
        argv = list(container.get("command", [])) + list(container.get("args", [])) + list(extra_args)
        envs = " ".join("%s=%s" % (k, sh_quote(v)) for k, v in env.items())
        mnt.append("exec chroot --userspec=%d:%d --groups=%d %s /usr/bin/env -i %s /bin/sh -c 'cd /opt/dapo && "
                   "exec \"$@\"' sh \"$@\"" % (sc["runAsUser"], sc["runAsGroup"], sc["fsGroup"], r, envs))
        logf = open(os.path.join(self.scratch, "%s-%s.log" % (pod_name, container["name"])), "ab")
        p = subprocess.Popen(["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "sh", "-c",
                              "\n".join(mnt), "sh"] + argv, stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        if wait:
            rc = p.wait()
            if rc:
                cm.fail("init container %s of %s exited %d (log %s)" % (container["name"], pod_name, rc, logf.name))
            return None
        self.procs[pod_name] = p
        self.specs[pod_name] = (pod, container, extra_args)
        return p

    def kubelet(self):
        """restartPolicy: Always: a container that exited is started again (its init containers are not rerun)."""
        for name, p in list(self.procs.items()):
            if p.poll() is not None:
                self.restarts[name] = self.restarts.get(name, 0) + 1
                log("%s exited with status %d: restarted (restart %d)" % (name, p.returncode, self.restarts[name]))
                self.start(name, *self.specs[name])

    def start_pod(self, pod_name, pod, extra_args=()):
        for ic in pod.get("initContainers", []):
            t0 = time.time()
            self.start(pod_name, pod, ic, wait=True)
            log("%s: init container %s done in %.0f s" % (pod_name, ic["name"], time.time() - t0))
        return self.start(pod_name, pod, pod["containers"][0], extra_args)

    def kill(self, pod_name, sig):
        p = self.procs.pop(pod_name)
        os.killpg(p.pid, sig)
        try:
            return p.wait(timeout=330)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            return p.wait()

    def close(self):
        for name in list(self.procs):
            self.kill(name, signal.SIGKILL)
        for n in range(1, self.n + 1):
            sh("ip netns del %s%d" % (TAG, n), check=False)
        sh("ip netns del %sh" % TAG, check=False)


def sh_quote(v):
    return "'" + str(v).replace("'", "'\\''") + "'"


def status(pods, token):
    ns = pods.netns("dapo-coordinator-0")
    ip = pods.addr["dapo-coordinator-0"][0]
    r = subprocess.run(["ip", "netns", "exec", ns, "curl", "-sf", "-m", "5", "-H", "Authorization: Bearer " + token,
                        "http://%s:8080/api/status" % ip], capture_output=True, text=True)
    return json.loads(r.stdout) if r.returncode == 0 and r.stdout else None


def wait_for(pods, token, what, pred, timeout):
    end = time.time() + timeout
    while time.time() < end:
        pods.kubelet()
        st = status(pods, token)
        if st and pred(st):
            return st
        time.sleep(1)
    cm.fail("timed out waiting for %s (last status: %s)" % (what, json.dumps(status(pods, token))[:1500]))


def worker(st, wid):
    return next((w for w in st.get("workers", []) if w.get("id") == wid), None)


def main():
    if os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("buildah"):
        print("SKIP pod_run: needs root, ip (iproute2) and buildah (make image)")
        return
    if subprocess.run(["buildah", "inspect", "--type", "image", IMAGE], capture_output=True).returncode:
        cm.fail("no image %s: run make image first" % IMAGE)
    scratch = tempfile.mkdtemp(prefix="dapo-podrun-")
    os.chmod(scratch, 0o755)
    pods = None
    try:
        rootfs = os.path.join(scratch, "rootfs")
        out = sh("%s/deploy/docker/unpack-image.sh %s %s" % (ROOT, IMAGE, rootfs))
        image_env = dict(l.split("=", 1) for l in out.splitlines() if "=" in l and not l.startswith("unpack"))
        for d in ("etc/dapo/recipe", "etc/dapo/keys", "etc/dapo/authorized_keys", "etc/dapo/token", "opt/dapo/runs"):
            os.makedirs(os.path.join(rootfs, d), exist_ok=True)
        tree = os.path.join(scratch, "k8s")
        shutil.copytree(os.path.join(ROOT, "deploy", "k8s"), tree, ignore=shutil.ignore_patterns("secrets"))
        cm.run([os.path.join(tree, "make-secrets.sh")], env=dict(os.environ, DAPO_KEYGEN=os.path.join(
            BUILD, "bin", "dapo-keygen")))
        objs = cm.render([cm.debian_kubectl(os.path.join(BUILD, "kubectl-1.20"))], tree)["cpu"]
        token = open(os.path.join(tree, "base", "secrets", "token")).read().strip()
        deps, sts = cm.by_kind(objs, "Deployment"), cm.by_kind(objs, "StatefulSet")
        coord = deps["dapo-coordinator"]["spec"]["template"]["spec"]
        short = ["trainer.total_training_steps=%d" % STEPS, "trainer.save_freq=2", "trainer.test_freq=-1",
                 "trainer.val_before_train=false"]
        pods = Pods(scratch, rootfs, image_env, objs)
        seed = os.environ.get("SEED_RUN_DIR")   # a run directory with data/ and base-model/ (make run's runs/default)
        if seed:                                # the prepare init container then finds them cached, as on a restart
            for d in ("data", "base-model"):
                shutil.copytree(os.path.join(seed, d), os.path.join(pods.pvc, "default", d))
            sh("chown -R 10001:10001 %s/default" % pods.pvc)
            log("run volume seeded with %s/{data,base-model}" % seed)
        for name in ("dapo-coordinator-0", "dapo-learner-0", "dapo-rollout-0", "dapo-rollout-1", "dapo-verifier-0"):
            pods.netns(name)                      # every address known before the first /etc/hosts is written
        pods.start_pod("dapo-coordinator-0", coord, short)
        learner = sts["dapo-learner"]["spec"]["template"]["spec"]
        rollout = sts["dapo-rollout"]["spec"]["template"]["spec"]
        verifier = deps["dapo-verifier"]["spec"]["template"]["spec"]
        pods.start_pod("dapo-learner-0", learner)
        pods.start_pod("dapo-rollout-0", rollout)
        pods.start_pod("dapo-verifier-0", verifier)
        st = wait_for(pods, token, "step 2", lambda s: s.get("step", 0) >= 2, 600)
        log("step %d trained across the pods; workers: %s" % (st["step"], ", ".join(
            "%s (key %s)" % (w["id"], w.get("key", "?")) for w in st["workers"])))
        for w in st["workers"]:
            if len(w.get("key", "")) != 16:
                cm.fail("worker %s is not on CURVE" % w["id"])
        # the rollout pod killed and replaced (same pod name: its worker id, rollout-0, registers again)
        pods.kill("dapo-rollout-0", signal.SIGKILL)
        at = st["step"]
        pods.start_pod("dapo-rollout-0", rollout)
        st = wait_for(pods, token, "a step after the rollout pod was replaced",
                      lambda s: s.get("step", 0) > at and (worker(s, "rollout-0") or {}).get("state") == "alive", 600)
        log("rollout-0 replaced; step %d" % st["step"])
        # scaled to 2 rollouts (kubectl scale statefulset dapo-rollout --replicas=2): rollout-1 joins the live run
        pods.start_pod("dapo-rollout-1", rollout)
        at = st["step"]
        st = wait_for(pods, token, "rollout-1 to join and a step to pass",
                      lambda s: s.get("step", 0) > at and (worker(s, "rollout-1") or {}).get("state") == "alive", 600)
        log("rollout-1 joined at step %d" % st["step"])
        # the coordinator pod stopped (SIGTERM: it checkpoints the step in training) and started again
        rc = pods.kill("dapo-coordinator-0", signal.SIGTERM)
        log("coordinator pod stopped (exit %d)" % rc)
        pods.start_pod("dapo-coordinator-0", coord, short)
        st = wait_for(pods, token, "the run to finish after the coordinator's restart",
                      lambda s: s.get("phase") == "done", 900)
        clog = open(os.path.join(scratch, "dapo-coordinator-0-coordinator.log")).read()
        if "resum" not in clog:
            cm.fail("the restarted coordinator did not resume from the run volume's checkpoint")
        groups = st.get("groups", {})
        states = ["queued", "leased", "generated", "scoring", "kept", "filtered", "surplus", "cancelled", "trained",
                  "validated", "stale"]
        if sum(groups.get(k, 0) for k in states) != groups.get("created") or any(groups.get(k) for k in states[:5]):
            cm.fail("the groups do not add up at the end: %s" % json.dumps(groups))
        if groups.get("trained") != STEPS * 16:               # data.train_batch_size 16 groups per step
            cm.fail("%s groups trained, not %d" % (groups.get("trained"), STEPS * 16))
        log("run done at step %d; every group accounted for (%d trained)" % (st["step"], groups["trained"]))
        ages = sh("find %s -name dapo-alive -mmin -1" % scratch).split()
        if len(ages) < 4:
            cm.fail("the workers' liveness files are not all fresh: %s" % ages)
        log("all passed (%d fresh liveness files)" % len(ages))
    finally:
        if pods:
            pods.close()
        if os.environ.get("KEEP"):
            log("kept %s" % scratch)
        else:
            sh("umount -R %s/rootfs 2>/dev/null; rm -rf %s" % (scratch, scratch), check=False)


if __name__ == "__main__":
    main()
