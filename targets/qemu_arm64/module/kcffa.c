// SPDX-License-Identifier: GPL-2.0
/*
 * kcffa: the host-side FF-A agent's kernel half (kconform, targets/qemu_arm64).
 *
 * A misc device /dev/kcffa with two ioctls:
 *   KCFFA_SMC   one SMC with x0..x17 in and x0..x17 out (arm_smccc_1_2_smc; at
 *               EL1 under pKVM protected mode the SMC traps to pKVM's FF-A proxy)
 *   KCFFA_INFO  the physical address and size of the agent's buffer
 * and mmap() of that buffer: one physically contiguous region (CMA, through
 * the DMA API on a platform device of our own) that stands for the scenarios'
 * harness RAM. It is zeroed at load. Nothing else: no FF-A state is kept here,
 * and Debian's arm_ffa driver is not loaded alongside (one RX/TX pair per
 * endpoint).
 */
#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/uaccess.h>
#include <linux/platform_device.h>
#include <linux/dma-mapping.h>
#include <linux/arm-smccc.h>

#include "kcffa_uapi.h"

static unsigned int buf_mb = 24;
module_param(buf_mb, uint, 0444);
MODULE_PARM_DESC(buf_mb, "size of the physically contiguous buffer in MiB");

static struct platform_device *kcffa_pdev;
static void *buf_va;
static dma_addr_t buf_dma;
static size_t buf_size;

static long kcffa_ioctl(struct file *f, unsigned int cmd, unsigned long arg)
{
	void __user *u = (void __user *)arg;

	switch (cmd) {
	case KCFFA_SMC: {
		struct kcffa_regs r;
		struct arm_smccc_1_2_regs in, out;

		BUILD_BUG_ON(sizeof(in) != sizeof(r.x));
		if (copy_from_user(&r, u, sizeof(r)))
			return -EFAULT;
		memcpy(&in, r.x, sizeof(in));
		memset(&out, 0, sizeof(out));
		arm_smccc_1_2_smc(&in, &out);
		memcpy(r.x, &out, sizeof(out));
		return copy_to_user(u, &r, sizeof(r)) ? -EFAULT : 0;
	}
	case KCFFA_INFO: {
		struct kcffa_info i = {
			.pa = (u64)buf_dma,
			.size = buf_size,
			.page_size = PAGE_SIZE,
		};
		return copy_to_user(u, &i, sizeof(i)) ? -EFAULT : 0;
	}
	default:
		return -ENOTTY;
	}
}

static int kcffa_mmap(struct file *f, struct vm_area_struct *vma)
{
	unsigned long len = vma->vm_end - vma->vm_start;

	if (vma->vm_pgoff || len > buf_size)
		return -EINVAL;
	return remap_pfn_range(vma, vma->vm_start, PHYS_PFN((phys_addr_t)buf_dma), len,
			       vma->vm_page_prot);
}

static const struct file_operations kcffa_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = kcffa_ioctl,
	.mmap = kcffa_mmap,
};

static struct miscdevice kcffa_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kcffa",
	.fops = &kcffa_fops,
};

static int __init kcffa_init(void)
{
	struct platform_device_info pi = {
		.name = "kcffa",
		.id = PLATFORM_DEVID_NONE,
		.dma_mask = DMA_BIT_MASK(64),
	};
	int ret;

	kcffa_pdev = platform_device_register_full(&pi);
	if (IS_ERR(kcffa_pdev))
		return PTR_ERR(kcffa_pdev);
	/* Plain cacheable memory from the linear map (no remapped alias). */
	dev_set_dma_coherent(&kcffa_pdev->dev);
	buf_size = (size_t)buf_mb << 20;
	buf_va = dma_alloc_coherent(&kcffa_pdev->dev, buf_size, &buf_dma, GFP_KERNEL);
	if (!buf_va) {
		pr_err("kcffa: no contiguous buffer of %u MiB (CMA)\n", buf_mb);
		platform_device_unregister(kcffa_pdev);
		return -ENOMEM;
	}
	memset(buf_va, 0, buf_size);
	ret = misc_register(&kcffa_misc);
	if (ret) {
		dma_free_coherent(&kcffa_pdev->dev, buf_size, buf_va, buf_dma);
		platform_device_unregister(kcffa_pdev);
		return ret;
	}
	pr_info("kcffa: buffer %zu bytes at pa 0x%llx\n", buf_size, (u64)buf_dma);
	return 0;
}

static void __exit kcffa_exit(void)
{
	misc_deregister(&kcffa_misc);
	dma_free_coherent(&kcffa_pdev->dev, buf_size, buf_va, buf_dma);
	platform_device_unregister(kcffa_pdev);
}

module_init(kcffa_init);
module_exit(kcffa_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kconform FF-A agent: raw SMCs and a contiguous buffer for the host's FF-A scenarios");
