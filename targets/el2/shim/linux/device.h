/* Stands in for <linux/device.h>: <linux/arm_ffa.h> embeds a struct device
 * in struct ffa_device (the FF-A bus driver's, unused at EL2). */
#ifndef KC_LINUX_DEVICE_H
#define KC_LINUX_DEVICE_H
struct device {
	void *driver_data;
};
struct device_driver {
	const char *name;
};
struct bus_type;
static inline void dev_set_drvdata(struct device *dev, void *data) { dev->driver_data = data; }
static inline void *dev_get_drvdata(const struct device *dev) { return dev->driver_data; }
#endif
