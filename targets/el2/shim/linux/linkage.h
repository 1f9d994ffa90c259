/* Stands in for <linux/linkage.h>: asmlinkage is plain C on the host. */
#ifndef KC_LINUX_LINKAGE_H
#define KC_LINUX_LINKAGE_H
#define asmlinkage
#endif
