/* Stands in for <linux/module.h> (included by <linux/arm_ffa.h>). */
#ifndef KC_LINUX_MODULE_H
#define KC_LINUX_MODULE_H
struct module;
#define THIS_MODULE ((struct module *)0)
#endif
