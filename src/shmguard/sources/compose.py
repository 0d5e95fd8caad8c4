"""Compose files, found by content: a top-level ``services`` mapping of service mappings.

Any file name counts (lint_traps.md: ``shm_size: 2Gi`` is right in Helm values and operator
CRDs, so a file is Compose only by this shape). Fields follow the Compose specification
(compose-spec ``05-services.md``, ``schema/compose-spec.json``; config_formats.md §2):
``shm_size``, ``ipc``, ``mem_limit``, ``memswap_limit``, ``deploy.resources.limits.memory``,
``deploy.resources.reservations.devices``, ``tmpfs``, ``volumes`` (tmpfs volumes and binds),
``build.shm_size``, ``privileged``, ``cap_add``, ``sysctls``, ``image``, ``command``,
``entrypoint``, ``environment``.

YAML anchors and merge keys (``x-`` extension fields with ``<<: *common``) are resolved by the
node layer. ``extends`` within the same file is resolved here: a field the service does not
set is looked up in the base service, recursively (compose-spec ``05-services.md`` "extends";
``environment`` entries merge, the service's own winning). ``extends`` with ``file:`` is not
followed: :attr:`ComposeService.extends_file` records it.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property

from shmguard.sources.k8s_model import EnvVar, dig, scalars, seq_maps, text
from shmguard.sources.yamlload import YamlFile
from shmguard.sources.yamlnode import YMap, YNode, YScalar, YSeq


def is_compose(root: YNode | None) -> bool:
    """True when ``root`` has a ``services`` mapping whose values are all mappings (at least
    one). Compose allows a service with an empty body (``db:``) only as null, accepted too."""
    services = dig(root, "services")
    if not isinstance(services, YMap) or not len(services):
        return False
    vals = [v for _, v in services.entries.values()]
    return all(isinstance(v, YMap) or (isinstance(v, YScalar) and v.value == "") for v in vals)


@dataclass(frozen=True)
class Mount:
    """A mount of a service: from ``tmpfs:`` (``kind`` "tmpfs", ``options`` the text after
    ``:``), a short volume ``src:dst[:mode]`` (``bind`` when the source is a path, else
    ``volume``) or a long volume (``type``). ``size`` is the long form's ``tmpfs.size`` node."""

    kind: str
    target: str | None
    source: str | None
    options: str | None
    size: YNode | None
    node: YNode


@dataclass(frozen=True)
class ComposeService:
    """One service; :meth:`get` looks a dotted field up through ``extends``.

    :attr:`file` is the :class:`ComposeFile` it is one of the services of, held weakly: the
    file holds its services, and a strong reference back would be a cycle keeping the whole
    document's tree until the cyclic garbage collector runs. A service that outlives its file
    gets a file built again from ``root`` and ``doc``, in which it is still one of the services.
    """

    name: str
    node: YMap
    root: YMap
    doc: int
    _file: Callable[[], ComposeFile | None] = field(repr=False, compare=False, hash=False)
    #: path -> node, filled by :meth:`get` (the tree never changes; rules read a field often).
    _found: dict[str, YNode | None] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )
    #: The service and its bases (``extends``), computed on first use.
    _bases: list[YMap] = field(
        default_factory=list, init=False, repr=False, compare=False, hash=False
    )
    #: :attr:`mounts`, computed on first use (several rules read them).
    _mounts: list[tuple[Mount, ...]] = field(
        default_factory=list, init=False, repr=False, compare=False, hash=False
    )

    @property
    def file(self) -> ComposeFile:
        """The Compose document this service belongs to."""
        cf = self._file()
        if cf is None:  # the file was dropped: a new one, holding this very service
            cf = ComposeFile(self.root, self.doc)
            cf.__dict__["_services"] = tuple(
                self if s.name == self.name else s for s in cf._services
            )
            object.__setattr__(self, "_file", lambda: cf)
        return cf

    @property
    def key(self) -> YScalar | None:
        """The node of the service's name (``services.<name>:``)."""
        services = dig(self.root, "services")
        return services.key_node(self.name) if isinstance(services, YMap) else None

    def _chain(self) -> list[YMap]:
        if not self._bases:
            self._bases.extend(self._walk_chain())
        return self._bases

    def _walk_chain(self) -> Iterator[YMap]:
        seen = {self.name}
        node: YMap | None = self.node
        while node is not None:
            yield node
            ext = node.get("extends")
            base = text(ext) if isinstance(ext, YScalar) else text(dig(ext, "service"))
            if base is None or base in seen or dig(ext, "file") is not None:
                return
            seen.add(base)
            nxt = dig(self.root, "services", base)
            node = nxt if isinstance(nxt, YMap) else None

    def get(self, path: str) -> YNode | None:
        """The node at a dotted ``path`` (``deploy.resources.limits.memory``), from the service
        or the first base service (``extends``) that sets it."""
        found_before = self._found
        if path in found_before:
            return found_before[path]
        result = None
        keys = path.split(".")
        for node in self._chain():
            found = dig(node, *keys)
            if found is not None:
                result = found
                break
        found_before[path] = result
        return result

    @property
    def extends_file(self) -> str | None:
        """``extends.file`` when the base service lives in another file (not followed)."""
        return text(dig(self.node, "extends", "file"))

    shm_size = property(lambda self: self.get("shm_size"), doc="``shm_size``")
    ipc = property(lambda self: self.get("ipc"), doc="``ipc``")
    mem_limit = property(lambda self: self.get("mem_limit"), doc="``mem_limit``")
    memswap_limit = property(lambda self: self.get("memswap_limit"), doc="``memswap_limit``")
    deploy_memory = property(
        lambda self: self.get("deploy.resources.limits.memory"),
        doc="``deploy.resources.limits.memory``",
    )
    build_shm_size = property(lambda self: self.get("build.shm_size"), doc="``build.shm_size``")
    privileged = property(lambda self: self.get("privileged"), doc="``privileged``")
    image = property(lambda self: self.get("image"), doc="``image``")
    command = property(lambda self: self.get("command"), doc="``command``")
    entrypoint = property(lambda self: self.get("entrypoint"), doc="``entrypoint``")
    sysctls = property(lambda self: self.get("sysctls"), doc="``sysctls`` (list or mapping)")

    @property
    def cap_add(self) -> list[YScalar]:
        """``cap_add`` entries."""
        return scalars(self.get("cap_add"))

    @property
    def gpu_devices(self) -> list[YMap]:
        """``deploy.resources.reservations.devices`` entries asking for a GPU (capabilities
        containing ``gpu``, or an ``nvidia`` driver)."""
        devs = seq_maps(self.get("deploy.resources.reservations.devices"))
        return [
            d
            for d in devs
            if any(c.value == "gpu" for c in scalars(d.get("capabilities")))
            or text(d.get("driver")) == "nvidia"
        ]

    @property
    def environment(self) -> list[EnvVar]:
        """``environment`` in list (``K=V``, ``K``) or mapping form, merged along ``extends``
        (the service's own entries win)."""
        out: dict[str, EnvVar] = {}
        for node in self._chain():
            env = node.get("environment")
            items: list[EnvVar] = []
            if isinstance(env, YMap):
                items = [EnvVar(k, v, kn) for k, (kn, v) in env.entries.items()]
            elif isinstance(env, YSeq):
                for s in scalars(env):
                    name, eq, _ = s.value.partition("=")
                    items.append(EnvVar(name, s if eq else None, s))
            for e in items:
                out.setdefault(e.name, e)
        return list(out.values())

    @property
    def mounts(self) -> list[Mount]:
        """``tmpfs`` entries and ``volumes`` (short and long syntax); a new list each time."""
        if not self._mounts:
            self._mounts.append(tuple(self._find_mounts()))
        return list(self._mounts[0])

    def _find_mounts(self) -> list[Mount]:
        out: list[Mount] = []
        tmpfs = self.get("tmpfs")
        for s in [tmpfs] if isinstance(tmpfs, YScalar) else scalars(tmpfs):
            assert isinstance(s, YScalar)
            target, _, opts = s.value.partition(":")
            out.append(Mount("tmpfs", target, None, opts or None, None, s))
        vols = self.get("volumes")
        for v in vols.items if isinstance(vols, YSeq) else []:
            if isinstance(v, YScalar):
                parts = v.value.split(":")
                src, dst = (parts[0], parts[1]) if len(parts) > 1 else (None, parts[0])
                kind = "bind" if src and src[0] in "/.~$" else "volume" if src else "anonymous"
                out.append(Mount(kind, dst, src, ":".join(parts[2:]) or None, None, v))
            elif isinstance(v, YMap):
                out.append(
                    Mount(
                        text(v.get("type")) or "volume",
                        text(v.get("target")),
                        text(v.get("source")),
                        None,
                        dig(v, "tmpfs", "size"),
                        v,
                    )
                )
        return out


@dataclass(frozen=True)
class ComposeFile:
    """A Compose document: its root mapping and services (in file order)."""

    root: YMap
    doc: int

    @property
    def services(self) -> list[ComposeService]:
        """The services; a null body (``db:``) has no fields and is left out. The same
        service objects on every access (a new list), so their lookups are kept."""
        return list(self._services)

    @cached_property
    def _services(self) -> tuple[ComposeService, ...]:
        services = dig(self.root, "services")
        if not isinstance(services, YMap):
            return ()
        ref = weakref.ref(self)
        return tuple(
            ComposeService(name, node, self.root, self.doc, ref)
            for name, (_, node) in services.entries.items()
            if isinstance(node, YMap)
        )


def compose_files(yf: YamlFile) -> list[ComposeFile]:
    """The Compose documents of a loaded YAML file (usually one)."""
    return [
        ComposeFile(d.root, d.index)
        for d in yf.documents
        if isinstance(d.root, YMap) and is_compose(d.root)
    ]
