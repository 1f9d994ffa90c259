/* Stands in for <linux/init.h> (included by <linux/arm-smccc.h>). */
#ifndef KC_LINUX_INIT_H
#define KC_LINUX_INIT_H
#define __init
#endif
