// smcss: the SMC sockets of the caller's network namespace, read from the kernel's SMC sock_diag
// (NETLINK_SOCK_DIAG, family AF_SMC), in the columns of smc-tools' smcss, which Debian does not
// package: State, UID, Inode, Local Address, Peer Address, Intf, Mode. Mode is SMCR, SMCD, or TCP
// with the local and peer fallback reasons. With -a listening sockets are shown too; with -R the
// RDMA device and GIDs of SMC-R connections follow each line. Standard C and the kernel's UAPI
// headers only, so the workload image carries it as a dynamic binary like tcp-bulk.
//   smcss [-a] [-R]
// Exit status: 0 with the table (possibly empty), 1 when the kernel has no SMC sock_diag (no SMC
// or no smc_diag), 2 on a usage error.
#include <arpa/inet.h>
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/smc_diag.h>
#include <linux/sock_diag.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef AF_SMC
#define AF_SMC 43
#endif

static const char* state_name(unsigned s) {
  // enum smc_state in the kernel's net/smc/smc.h (the values are its user-visible diag_state).
  switch (s) {
    case 1: return "ACTIVE";
    case 2: return "INIT";
    case 7: return "CLOSED";
    case 10: return "LISTEN";
    case 20: return "PEERCLW1";
    case 21: return "PEERCLW2";
    case 22: return "APPCLW1";
    case 23: return "APPCLW2";
    case 24: return "APPFINCLW";
    case 25: return "PEERFINCLW";
    case 26: return "PEERABORTW";
    case 27: return "PROCESSABORT";
    default: return "UNKNOWN";
  }
}

static void endpoint(char* out, size_t n, const struct smc_diag_msg* m, int local) {
  const __be32* a = local ? m->id.idiag_src : m->id.idiag_dst;
  unsigned port = ntohs(local ? m->id.idiag_sport : m->id.idiag_dport);
  char ip[INET6_ADDRSTRLEN] = "?";
  // IPv4 sockets fill word 0 only.
  if (m->diag_family == AF_INET6 || a[1] || a[2] || a[3]) {
    inet_ntop(AF_INET6, a, ip, sizeof ip);
    snprintf(out, n, "[%s]:%u", ip, port);
  } else {
    inet_ntop(AF_INET, a, ip, sizeof ip);
    snprintf(out, n, "%s:%u", ip, port);
  }
}

int main(int argc, char** argv) {
  int all = 0, rdma = 0, opt;
  while ((opt = getopt(argc, argv, "aR")) != -1) {
    if (opt == 'a') all = 1;
    else if (opt == 'R') rdma = 1;
    else {
      fprintf(stderr, "usage: smcss [-a] [-R]\n");
      return 2;
    }
  }
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) {
    perror("smcss: socket(NETLINK_SOCK_DIAG)");
    return 1;
  }
  struct {
    struct nlmsghdr h;
    struct smc_diag_req r;
  } req;
  memset(&req, 0, sizeof req);
  req.h.nlmsg_len = sizeof req;
  req.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  req.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  req.h.nlmsg_seq = 1;
  req.r.diag_family = AF_SMC;
  req.r.diag_ext = (1 << (SMC_DIAG_LGRINFO - 1)) | (1 << (SMC_DIAG_FALLBACK - 1));
  if (send(fd, &req, sizeof req, 0) < 0) {
    perror("smcss: send");
    return 1;
  }
  static char buf[1 << 16];
  int header = 0;
  for (;;) {
    ssize_t len = recv(fd, buf, sizeof buf, 0);
    if (len < 0) {
      if (errno == EINTR) continue;
      perror("smcss: recv");
      return 1;
    }
    for (struct nlmsghdr* h = (struct nlmsghdr*)buf; NLMSG_OK(h, (size_t)len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_type != NLMSG_ERROR && !header) {  // the kernel answered: a table, maybe empty
        printf("%-12s %-5s %-7s %-23s %-23s %-4s %s\n", "State", "UID", "Inode", "Local Address", "Peer Address",
               "Intf", "Mode");
        header = 1;
      }
      if (h->nlmsg_type == NLMSG_DONE) return 0;
      if (h->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr* e = NLMSG_DATA(h);
        fprintf(stderr, "smcss: the kernel refused the SMC sock_diag dump: %s (no SMC, or no smc_diag)\n",
                strerror(-e->error));
        return 1;
      }
      if (h->nlmsg_len < NLMSG_LENGTH(sizeof(struct smc_diag_msg))) continue;
      const struct smc_diag_msg* m = NLMSG_DATA(h);
      if (m->diag_state == 10 && !all) continue;
      const struct smc_diag_fallback* fb = NULL;
      const struct smc_diag_lgrinfo* lgr = NULL;
      int alen = h->nlmsg_len - NLMSG_LENGTH(sizeof *m);
      for (struct rtattr* a = (struct rtattr*)((char*)m + NLMSG_ALIGN(sizeof *m)); RTA_OK(a, alen);
           a = RTA_NEXT(a, alen)) {
        if (a->rta_type == SMC_DIAG_FALLBACK && RTA_PAYLOAD(a) >= sizeof *fb) fb = RTA_DATA(a);
        if (a->rta_type == SMC_DIAG_LGRINFO && RTA_PAYLOAD(a) >= sizeof *lgr) lgr = RTA_DATA(a);
      }
      char local[64], peer[64], mode[48];
      endpoint(local, sizeof local, m, 1);
      endpoint(peer, sizeof peer, m, 0);
      if (m->diag_mode == SMC_DIAG_MODE_SMCR) snprintf(mode, sizeof mode, "SMCR");
      else if (m->diag_mode == SMC_DIAG_MODE_SMCD) snprintf(mode, sizeof mode, "SMCD");
      else if (fb) snprintf(mode, sizeof mode, "TCP 0x%08x/0x%08x", fb->reason, fb->peer_diagnosis);
      else snprintf(mode, sizeof mode, "TCP");
      if (m->diag_state == 10 || m->diag_state == 2) snprintf(mode, sizeof mode, "-");  // no connection yet
      printf("%-12s %05u %07llu %-23s %-23s %04x %s", state_name(m->diag_state), m->diag_uid,
             (unsigned long long)m->diag_inode, local, peer, m->id.idiag_if, mode);
      if (rdma && lgr && m->diag_mode == SMC_DIAG_MODE_SMCR)
        printf(" ib=%.64s/%u gid=%.40s peer=%.40s", (const char*)lgr->lnk[0].ibname, lgr->lnk[0].ibport,
               (const char*)lgr->lnk[0].gid, (const char*)lgr->lnk[0].peer_gid);
      printf("\n");
    }
  }
}
