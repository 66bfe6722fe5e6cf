#!/usr/bin/env python3
"""tests/k8s/check_manifests.py: offline checks of deploy/k8s (issue 19), run by `make check-k8s` (and .ci/run).

1. Render each overlay with `kubectl kustomize`, with Debian's kubectl 1.20 (kubernetes-client: the oldest
   kustomize the manifests promise to work with; taken from the .deb with `apt-get download`, not installed) and
   with the kubectl on PATH when there is one; both must give the same objects (up to generated names' hash
   suffixes and base64 line breaks). Secrets come from deploy/k8s/make-secrets.sh, in a scratch copy.
2. yamllint (deploy/k8s/.yamllint) on the sources; kubernetes-validate --strict against a pinned Kubernetes
   version on every rendered object.
3. Consistency (as root; SKIP otherwise): every workload container's command, with its env, is run with
   --print-config appended, inside a private mount namespace where its volumes are mounted where the manifest
   mounts them (the rendered ConfigMap and Secret files, emptyDirs, the run volume) and the image's layout is
   /opt/dapo (this build's bin/, the tree's configs/ and data/), as the pod name's rank or id would be. The
   effective config must point at the Services' names and ports, bind the container ports the Services target,
   name mounted files for keys, token and the liveness file, and agree on the number of learner ranks.
Exit status 0 when everything passed; the first failure is printed.
"""
import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("DAPO_BUILD", os.path.join(ROOT, "build"))
K8S_VERSION = "1.37.0"          # kubernetes-validate's schemas (pinned in tests/k8s/requirements.txt)
OVERLAYS = ["cpu", "gpu"]


def fail(msg):
    print("check_manifests: FAIL: " + msg)
    sys.exit(1)


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        fail("%s exited %d:\n%s%s" % (" ".join(cmd), r.returncode, r.stdout, r.stderr))
    return r.stdout


def debian_kubectl(cache):
    """kubectl 1.20 from Debian's kubernetes-client .deb, extracted into cache (downloaded once)."""
    exe = os.path.join(cache, "root", "usr", "bin", "kubectl")
    if os.path.exists(exe):
        return exe
    os.makedirs(cache, exist_ok=True)
    if subprocess.run(["apt-get", "download", "kubernetes-client"], cwd=cache, capture_output=True).returncode:
        run(["apt-get", "update", "-qq"])                   # no package lists yet (a fresh machine)
        run(["apt-get", "download", "kubernetes-client"], cwd=cache)
    deb = [f for f in os.listdir(cache) if f.startswith("kubernetes-client_") and f.endswith(".deb")]
    if not deb:
        fail("apt-get download kubernetes-client gave no .deb")
    run(["dpkg-deb", "-x", os.path.join(cache, deb[0]), os.path.join(cache, "root")])
    return exe


def normalized(objs):
    """Objects keyed by (kind, name without a generator's hash suffix); references to generated names and base64
    line breaks normalized, so two kustomize versions can be compared."""
    gen = {}
    for o in objs:
        if o["kind"] in ("ConfigMap", "Secret"):
            gen[o["metadata"]["name"]] = o["metadata"]["name"].rsplit("-", 1)[0]
    text = yaml.safe_dump(objs)
    for full, short in gen.items():
        text = text.replace(full, short)
    out = {}
    for o in yaml.safe_load(text):
        if o["metadata"].get("annotations") == {}:               # kustomize 2 writes them on a replaced ConfigMap
            del o["metadata"]["annotations"]
        if o["kind"] == "Secret":
            o["data"] = {k: base64.b64decode(v) for k, v in o.get("data", {}).items()}
        out[(o["kind"], o["metadata"]["name"])] = o
    return out


def render(kubectls, tree):
    rendered = {}
    for ov in OVERLAYS:
        outs = []
        for k in kubectls:
            text = run([k, "kustomize", os.path.join(tree, "overlays", ov)])
            outs.append((k, [o for o in yaml.safe_load_all(text) if o]))
        base = normalized(outs[0][1])
        for k, objs in outs[1:]:
            other = normalized(objs)
            if base != other:
                diff = sorted(set(base) ^ set(other)) or [x for x in base if base[x] != other.get(x)]
                fail("overlay %s renders differently with %s and %s: %s" % (ov, outs[0][0], k, diff))
        rendered[ov] = outs[0][1]
        print("check_manifests: overlay %s: %d objects, the same with %s" % (ov, len(outs[0][1]),
                                                                               " and ".join(k for k, _ in outs)))
    return rendered


def validate(tree, rendered, scratch):
    run(["yamllint", "-c", os.path.join(ROOT, "deploy", "k8s", ".yamllint"), os.path.join(ROOT, "deploy", "k8s")])
    print("check_manifests: yamllint: clean")
    for ov, objs in rendered.items():
        path = os.path.join(scratch, ov + ".yaml")
        with open(path, "w") as f:
            yaml.safe_dump_all(objs, f)
        run(["kubernetes-validate", "--strict", "--quiet", "-k", K8S_VERSION, path])
        print("check_manifests: kubernetes-validate --strict -k %s: overlay %s passed" % (K8S_VERSION, ov))
    recipes(scratch)


def resolved(path, scratch, *overrides):
    """dapo-coordinator --print-config of a recipe, its /opt/dapo/configs/ bases read from this checkout's configs/."""
    with open(path) as f:
        text = f.read().replace("/opt/dapo/configs/", os.path.join(ROOT, "configs") + "/")
    tmp = os.path.join(scratch, "recipe-" + os.path.basename(os.path.dirname(path)) + ".yaml")
    with open(tmp, "w") as f:
        f.write(text)
    return run([os.path.join(BUILD, "bin", "dapo-coordinator"), "--config", tmp, "--print-config"] + list(overrides))


def recipes(scratch):
    """The base recipe resolves to configs/default.yaml's config; the GPU one to the same but trainer.device cuda."""
    want = run([os.path.join(BUILD, "bin", "dapo-coordinator"), "--config", os.path.join(ROOT, "configs", "default.yaml"),
                "--print-config"])
    want = yaml.safe_load(want)           # values only: --print-config's "# source" comments name different files
    base = os.path.join(ROOT, "deploy", "k8s", "base", "recipe.yaml")
    if yaml.safe_load(resolved(base, scratch)) != want:
        fail("deploy/k8s/base/recipe.yaml does not resolve to configs/default.yaml's config")
    gpu = os.path.join(ROOT, "deploy", "k8s", "overlays", "gpu", "recipe.yaml")
    with open(gpu) as f:
        if (yaml.safe_load(f).get("trainer") or {}).get("device") != "cuda":
            fail("deploy/k8s/overlays/gpu/recipe.yaml does not set trainer.device: cuda")
    if yaml.safe_load(resolved(gpu, scratch, "trainer.device=cpu")) != want:
        fail("deploy/k8s/overlays/gpu/recipe.yaml differs from configs/default.yaml in more than trainer.device")
    print("check_manifests: the base and GPU recipes resolve to configs/default.yaml (the GPU one with device cuda)")


# ---------------------------------------------------------------------------------------------- consistency

class Named(dict):
    """Objects of one kind by name; a missing one is a failure naming it, not a KeyError."""
    kind = ""

    def __missing__(self, name):
        fail("the overlay has no %s named %s (renamed? the checks and the daemons' addresses expect it)" %
             (self.kind, name))


def by_kind(objs, kind):
    d = Named({o["metadata"]["name"]: o for o in objs if o["kind"] == kind})
    d.kind = kind
    return d


def check_pods(objs, tag):
    """Every pod: the image tag of its overlay; an fsGroup; Secret volumes no wider than 0440 (the daemons refuse a
    key file that is, with a message naming chmod: here the fix is defaultMode)."""
    for o in objs:
        if o["kind"] not in ("Deployment", "StatefulSet"):
            continue
        pod = o["spec"]["template"]["spec"]
        name = o["metadata"]["name"]
        if "fsGroup" not in pod.get("securityContext", {}):
            fail("%s: no securityContext.fsGroup: uid 10001 could not read its Secret files" % name)
        for c in pod.get("initContainers", []) + pod["containers"]:
            if not c["image"].endswith(":" + tag):
                fail("%s container %s runs %s, not the overlay's :%s image" % (name, c["name"], c["image"], tag))
        for v in pod.get("volumes", []):
            mode = v.get("secret", {}).get("defaultMode", 0o644)
            if "secret" in v and v["secret"]["secretName"].startswith(("dapo-curve-", "dapo-token-")) and \
                    not v["secret"]["secretName"].startswith("dapo-curve-authorized") and mode & 0o037:
                fail("%s: Secret volume %s has defaultMode %o: key and token files must be 0440 at most" %
                     (name, v["name"], mode))


def materialize(pod, objs, vol_root):
    """Writes each volume of pod spec `pod` under vol_root/NAME: ConfigMap/Secret files (items, modes), empty
    dirs for emptyDir and the PVC. Returns {volume name: host dir}."""
    cms, secrets = by_kind(objs, "ConfigMap"), by_kind(objs, "Secret")
    dirs = {}
    for v in pod.get("volumes", []):
        d = os.path.join(vol_root, v["name"])
        os.makedirs(d)
        os.chmod(d, 0o755)
        if "configMap" in v or "secret" in v:
            src = v.get("configMap") or v.get("secret")
            name = src.get("name") or src.get("secretName")
            obj = cms.get(name) or secrets.get(name)
            if obj is None:
                fail("volume %s names %s, which the overlay does not make" % (v["name"], name))
            data = {k: val.encode() for k, val in obj.get("data", {}).items()} if obj["kind"] == "ConfigMap" else \
                {k: base64.b64decode(val) for k, val in obj.get("data", {}).items()}
            items = src.get("items") or [{"key": k, "path": k} for k in data]
            for it in items:
                if it["key"] not in data:
                    fail("volume %s: %s has no key %s" % (v["name"], name, it["key"]))
                p = os.path.join(d, it["path"])
                with open(p, "wb") as f:
                    f.write(data[it["key"]])
                os.chown(p, 0, pod["securityContext"].get("fsGroup", 0))   # as kubelet with an fsGroup
                os.chmod(p, src.get("defaultMode", 0o644))
        else:
            os.chown(d, pod["securityContext"].get("runAsUser", 0), pod["securityContext"].get("fsGroup", 0))
            os.chmod(d, 0o775)
        dirs[v["name"]] = d
    return dirs


def print_config(container, pod, objs, env, scratch):
    """The container's command + args + --print-config, run as the pod's user in a private mount namespace with
    the manifest's mounts; returns the parsed config."""
    vol_root = tempfile.mkdtemp(dir=scratch)
    os.chmod(vol_root, 0o755)
    dirs = materialize(pod, objs, vol_root)
    etc = os.path.join(scratch, "etc")                     # a copy of /etc to hold the mount points under /etc
    mounts = []
    for m in container.get("volumeMounts", []):
        target = m["mountPath"]
        if target.startswith("/etc/"):
            os.makedirs(etc + target[4:], exist_ok=True)
        mounts.append((dirs[m["name"]], target))
    argv = list(container.get("command", [])) + list(container.get("args", [])) + ["--print-config"]
    image = [(os.path.join(BUILD, "bin"), "/opt/dapo/bin"), (os.path.join(ROOT, "configs"), "/opt/dapo/configs"),
             (os.path.join(ROOT, "data"), "/opt/dapo/data")]
    sh = ["set -e", "mount --bind %s /etc" % etc, "mount -t tmpfs tmpfs /opt",
          "mkdir -p /opt/dapo/bin /opt/dapo/configs /opt/dapo/data /opt/dapo/runs"]
    sh += ["mount --bind %s %s" % (a, b) for a, b in image]
    sh += ["mkdir -p %s && mount --bind %s %s" % (b, a, b) for a, b in mounts if b not in ("/tmp", "/dev/shm")]
    sh += ["mount --bind %s %s" % (a, b) for a, b in mounts if b == "/dev/shm"]
    sh += ["mount --bind %s %s" % (a, b) for a, b in mounts if b == "/tmp"]      # last: the sources live in /tmp
    sc = pod["securityContext"]
    uid, gid = sc.get("runAsUser", 0), sc.get("runAsGroup", 0)
    sh.append("cd /opt/dapo && exec setpriv --reuid=%d --regid=%d --groups=%d -- \"$@\"" % (uid, gid,
                                                                                             sc.get("fsGroup", gid)))
    full_env = {"PATH": "/opt/dapo/bin:/usr/bin:/bin", "DAPO_ROOT": "/opt/dapo", "HOME": "/tmp"}
    full_env.update(env)
    r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", "\n".join(sh), "sh"] + argv,
                       capture_output=True, text=True, env=full_env)
    if r.returncode != 0:
        fail("%s (env %s) --print-config exited %d:\n%s%s" % (container["name"], env, r.returncode, r.stdout,
                                                               r.stderr))
    try:
        return yaml.safe_load(r.stdout)
    except yaml.YAMLError as e:
        fail("%s --print-config printed no YAML (%s):\n%s" % (container["name"], e, r.stdout[:2000]))


def endpoint(ep):
    m = re.fullmatch(r"tcp://([^:]+):(\d+)", ep or "")
    if not m:
        fail("not a tcp://HOST:PORT endpoint: %r" % ep)
    return m.group(1), int(m.group(2))


def container_env(c, pod_name):
    env = {}
    for e in c.get("env", []):
        if "value" in e:
            env[e["name"]] = e["value"]
        elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name":
            env[e["name"]] = pod_name
    return env


def port_of(c, name):
    for p in c.get("ports", []):
        if p["name"] == name:
            return p["containerPort"]
    fail("container %s has no port named %s" % (c["name"], name))


def service_port(svc, name):
    for p in svc["spec"].get("ports", []):
        if p["name"] == name:
            return p["port"], p["targetPort"]
    fail("Service %s has no port %s" % (svc["metadata"]["name"], name))


def mounted(c, path):
    return any(path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
               for m in c.get("volumeMounts", []))


def liveness_file(c):
    cmd = " ".join(c.get("livenessProbe", {}).get("exec", {}).get("command", []))
    m = re.search(r"find (\S+) -mmin", cmd)
    return m.group(1) if m else None


def check_curve(name, c, cfg, serves):
    cu = cfg["cluster"]["curve"]
    keys = ["server_public_key"] + (["server_secret_key", "authorized_keys"] if serves else ["secret_key"])
    for k in keys:
        if not cu.get(k) or not mounted(c, cu[k]):
            fail("%s: cluster.curve.%s = %r is not a mounted file" % (name, k, cu.get(k)))


def consistency(objs, scratch):
    deps, sts, svcs = by_kind(objs, "Deployment"), by_kind(objs, "StatefulSet"), by_kind(objs, "Service")
    coord_svc = svcs["dapo-coordinator"]
    learner_sts = sts["dapo-learner"]
    learners = learner_sts["spec"]["replicas"]
    workers_port, workers_target = service_port(coord_svc, "workers")
    want_coord = ("dapo-coordinator", workers_port)
    # the coordinator
    pod = deps["dapo-coordinator"]["spec"]["template"]["spec"]
    c = pod["containers"][0]
    cfg = print_config(c, pod, objs, container_env(c, "dapo-coordinator-x"), scratch)
    cl = cfg["cluster"]
    host, port = endpoint(cl["bind"])
    if host != "0.0.0.0" or port != port_of(c, workers_target):
        fail("coordinator binds %s, not the port the Service targets (%s)" % (cl["bind"], workers_target))
    http_port = int(cl["http"].rsplit(":", 1)[1])
    if http_port != port_of(c, "http") or service_port(coord_svc, "http")[1] != "http":
        fail("coordinator dashboard %s is not its http container port / Service port" % cl["http"])
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        if c[probe]["httpGet"]["port"] != "http":
            fail("coordinator %s does not probe the dashboard port" % probe)
    if not mounted(c, cl["token_file"]):
        fail("coordinator cluster.token_file %s is not mounted" % cl["token_file"])
    if cl["num_learners"] != learners:
        fail("coordinator cluster.num_learners %d != the learner StatefulSet's replicas %d" % (cl["num_learners"],
                                                                                               learners))
    check_curve("coordinator", c, cfg, True)
    print("check_manifests: coordinator: binds %s and %s, %d learner rank(s), CURVE files mounted" %
          (cl["bind"], cl["http"], cl["num_learners"]))
    # the learner ranks (rank 0 and, as the pod names give it, rank 1)
    lsvc = svcs[learner_sts["spec"]["serviceName"]]
    if lsvc["spec"].get("clusterIP") != "None":
        fail("the learners' Service %s is not headless" % lsvc["metadata"]["name"])
    pod = learner_sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    rank0_dns = "%s-0.%s" % (learner_sts["metadata"]["name"], lsvc["metadata"]["name"])
    wport, wtarget = service_port(lsvc, "weights")
    cport, ctarget = service_port(lsvc, "collective")
    for rank in (0, 1):
        cr = c
        if rank >= learners:        # as an overlay with 2 ranks has it (replicas: 2, cluster.num_learners=2)
            cr = dict(c, args=[a.replace("cluster.num_learners=%d" % learners, "cluster.num_learners=%d" % (rank + 1))
                               for a in c["args"]])
        cfg = print_config(cr, pod, objs, container_env(c, "%s-%d" % (learner_sts["metadata"]["name"], rank)),
                           scratch)
        cl = cfg["cluster"]
        if endpoint(cl["coordinator"]) != want_coord:
            fail("learner rank %d: cluster.coordinator %s is not the coordinator's Service" % (rank, cl["coordinator"]))
        if cl["num_learners"] != max(learners, rank + 1):
            fail("learner rank %d: cluster.num_learners %d != replicas %d" % (rank, cl["num_learners"], learners))
        coll = endpoint(cl["collective"])
        want = ("0.0.0.0", port_of(c, ctarget)) if rank == 0 else (rank0_dns, cport)
        if coll != want:
            fail("learner rank %d: cluster.collective %s, want tcp://%s:%d" % (rank, cl["collective"], *want))
        if rank == 0 and endpoint(cl["weights_bind"]) != ("0.0.0.0", port_of(c, wtarget)):
            fail("learner rank 0: cluster.weights_bind %s is not its weights port" % cl["weights_bind"])
        if cl["health_file"] != liveness_file(c) or not mounted(c, cl["health_file"]):
            fail("learner: cluster.health_file %s is not what the liveness probe reads" % cl["health_file"])
        check_curve("learner rank %d" % rank, c, cfg, rank == 0)
    print("check_manifests: learner: rank 0 binds the weights and collective ports, rank 1 reaches %s:%d" %
          (rank0_dns, cport))
    # rollouts and verifiers
    for kind, name in (("StatefulSet", "dapo-rollout"), ("Deployment", "dapo-verifier")):
        obj = (sts if kind == "StatefulSet" else deps)[name]
        pod = obj["spec"]["template"]["spec"]
        c = pod["containers"][0]
        cfg = print_config(c, pod, objs, container_env(c, name + "-3"), scratch)
        cl = cfg["cluster"]
        if endpoint(cl["coordinator"]) != want_coord:
            fail("%s: cluster.coordinator %s is not the coordinator's Service" % (name, cl["coordinator"]))
        if name == "dapo-rollout" and endpoint(cl["weights"]) != (rank0_dns, wport):
            fail("rollout: cluster.weights %s is not learner rank 0's weights port (%s:%d)" % (cl["weights"],
                                                                                              rank0_dns, wport))
        if cl["health_file"] != liveness_file(c) or not mounted(c, cl["health_file"]):
            fail("%s: cluster.health_file %s is not what the liveness probe reads" % (name, cl["health_file"]))
        check_curve(name, c, cfg, False)
        print("check_manifests: %s: connects to %s%s" % (name, cl["coordinator"],
                                                         ", weights from " + cl["weights"] if "rollout" in name else ""))


def main():
    scratch = tempfile.mkdtemp(prefix="dapo-k8s-")
    try:
        tree = os.path.join(scratch, "k8s")
        shutil.copytree(os.path.join(ROOT, "deploy", "k8s"), tree, ignore=shutil.ignore_patterns("secrets"))
        run([os.path.join(tree, "make-secrets.sh")], env=dict(os.environ, DAPO_KEYGEN=os.path.join(BUILD, "bin",
                                                                                                    "dapo-keygen")))
        kubectls = [debian_kubectl(os.path.join(BUILD, "kubectl-1.20"))]
        system = shutil.which("kubectl")
        if system and os.path.realpath(system) != os.path.realpath(kubectls[0]):
            kubectls.append(system)
        rendered = render(kubectls, tree)
        validate(tree, rendered, scratch)
        if os.geteuid() != 0:
            print("check_manifests: SKIP the consistency runs: they need root (a mount namespace)")
            return
        run(["cp", "-a", "/etc", os.path.join(scratch, "etc")])
        for ov, tag in (("cpu", "latest"), ("gpu", "cuda")):
            check_pods(rendered[ov], tag)
            consistency(rendered[ov], scratch)
            print("check_manifests: overlay %s consistent" % ov)
        print("check_manifests: all passed")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
