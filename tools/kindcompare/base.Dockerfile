# kind v0.33.0's images/base/Dockerfile, step for step, for the legacy
# builder (no BuildKit here) and with no network but Debian's mirror:
# - COPY --chmod (BuildKit only) is a plain COPY; kindcompare gives the
#   files kind's modes in the build context (scripts 0755, others 0644);
# - the go-build stages, which clone containerd, runc, cri-tools, the CNI
#   plugins and fuse-overlayfs-snapshotter from GitHub, are replaced by
#   the same programs built by kindcompare from the Go module proxy, in
#   bin/ of the build context;
# - BASE_IMAGE is a Debian bookworm made with mmdebstrap (kind: trixie-slim,
#   whose systemd 257 does not boot on a cgroup v1 host).
ARG BASE_IMAGE
FROM $BASE_IMAGE AS build
LABEL dev.kindtest.kindcompare.stage=base

COPY files/usr/local/bin/ /usr/local/bin/
COPY files/kind/ /kind/
COPY files/LICENSES/ /LICENSES/
COPY files/etc/ /etc/

RUN chmod 755 /kind /kind/bin && \
    echo "Installing Packages ..." \
    && DEBIAN_FRONTEND=noninteractive clean-install \
      systemd \
      conntrack iptables nftables iproute2 ethtool util-linux mount kmod \
      libseccomp2 pigz fuse-overlayfs \
      nfs-common open-iscsi \
      e2fsprogs \
      bash ca-certificates curl jq procps \
    && find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete \
    && rm -f /lib/systemd/system/multi-user.target.wants/* \
    && rm -f /etc/systemd/system/*.wants/* \
    && rm -f /lib/systemd/system/local-fs.target.wants/* \
    && rm -f /lib/systemd/system/sockets.target.wants/*udev* \
    && rm -f /lib/systemd/system/sockets.target.wants/*initctl* \
    && rm -f /lib/systemd/system/basic.target.wants/* \
    && echo "ReadKMsg=no" >> /etc/systemd/journald.conf \
    && ln -s /usr/lib/systemd/systemd /sbin/init

RUN echo "Enabling / Disabling services ... " \
    && systemctl enable kubelet.service \
    && systemctl enable containerd.service \
    && systemctl enable undo-mount-hacks.service \
    && systemctl mask systemd-binfmt.service

RUN echo "Ensuring /etc/kubernetes/manifests" \
    && mkdir -p /etc/kubernetes/manifests

COPY bin/containerd bin/ctr bin/containerd-shim-runc-v2 /usr/local/bin/
RUN ctr oci spec \
        | jq '.hooks.createContainer[.hooks.createContainer| length] |= . + {"path": "/kind/bin/mount-product-files.sh"}' \
        | jq 'del(.process.rlimits)' \
        > /etc/containerd/cri-base.json \
    && containerd --version
COPY bin/runc /usr/local/sbin/runc
RUN runc --version
COPY bin/crictl /usr/local/bin/
RUN mkdir -p /opt/cni/bin
COPY bin/host-local bin/loopback bin/ptp bin/portmap /opt/cni/bin/
COPY bin/containerd-fuse-overlayfs-grpc /usr/local/bin/

# squash down to one layer, as kind does
FROM scratch
COPY --from=build / /
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT [ "/usr/local/bin/entrypoint", "/sbin/init" ]
