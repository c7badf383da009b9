/* vk: the Vulkan device layer. The loader is opened at run time (dlopen), so a binary built with
 * Vulkan still starts, and runs on the CPU, where there is none. */
#define VK_NO_PROTOTYPES
#include "backend/vulkan/vk.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include "backend/vulkan/spirv.h"
#include "types/types.h"

/* The entry points used, by level: the loader's, the instance's, the device's. */
// clang-format off
#define VK_GLOBAL_FNS(X) X(vkCreateInstance)
#define VK_INSTANCE_FNS(X) \
    X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties) \
    X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties) \
    X(vkCreateDevice) X(vkGetDeviceProcAddr) X(vkEnumerateDeviceExtensionProperties) \
    X(vkGetPhysicalDeviceFeatures2)
#define VK_DEVICE_FNS(X) \
    X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkCreateBuffer) X(vkDestroyBuffer) \
    X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) \
    X(vkMapMemory) X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreateDescriptorSetLayout) \
    X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) X(vkDestroyPipelineLayout) \
    X(vkCreateComputePipelines) X(vkDestroyPipeline) X(vkCreateDescriptorPool) \
    X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets) X(vkUpdateDescriptorSets) \
    X(vkResetDescriptorPool) X(vkCreateCommandPool) X(vkDestroyCommandPool) \
    X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer) \
    X(vkResetCommandBuffer) X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) \
    X(vkCmdDispatch) X(vkCmdPipelineBarrier) X(vkCmdCopyBuffer) X(vkQueueSubmit) X(vkCreateFence) X(vkDestroyFence) X(vkWaitForFences) \
    X(vkResetFences)
// clang-format on

#define VK_DECLARE(fn) PFN_##fn fn;
typedef struct {
    VK_GLOBAL_FNS(VK_DECLARE)
    VK_INSTANCE_FNS(VK_DECLARE)
    VK_DEVICE_FNS(VK_DECLARE)
} vk_fns;

#define MAX_PIPES 64
#define MAX_SETS 16384 /* kernels in one run: one row of a 500-layer model, or several of smaller ones */
#define PUSH_BYTES 64
#define BINDINGS 5 /* storage buffers a kernel may bind */

typedef struct {
    const char *name;
    VkPipeline pipe;
} vk_pipe;

struct vk_ctx {
    vk_fns f;
    VkPhysicalDevice phys;
    VkPhysicalDeviceMemoryProperties mem;
    char name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
    VkDevice dev;
    VkQueue queue;
    uint32_t family;
    VkDescriptorSetLayout dsl;
    VkPipelineLayout layout;
    VkDescriptorPool pool;
    VkCommandPool cmd_pool;
    VkCommandBuffer cmd;
    VkFence fence;
    vk_pipe pipes[MAX_PIPES];
    int n_pipes;
    int recording, n_sets; /* between vk_begin and vk_run: the kernels recorded */
    int run_limit; /* kernels a run may hold: MAX_SETS, or fewer (TRIT_VK_RUN_KERNELS) */
    int int_dot; /* the device's integer dot product is enabled (and in use: vk_use_int_dot) */
    int has_int_dot;
    int failed; /* a kernel could not be recorded: why, for vk_run */
    char why[512];
    uint64_t budget, used; /* bytes the buffers may take (the heap, or TRIT_VK_MEMORY), and take */
    long lose_after; /* TRIT_VK_LOSE_AFTER: the device is lost after that many runs (-1: never) */
    int lost;
};

struct vk_buf {
    vk_ctx *c;
    VkBuffer buf;
    VkDeviceMemory mem;
    void *map;
    size_t bytes;
    uint64_t alloc; /* bytes of device memory it holds */
};

#define MIB 1048576.0

static int vk_fail(trit_err *err, const char *what, VkResult r) { return fail(err, "vulkan: %s failed (%d)", what, r); }

/* The loader, one instance and its physical devices, opened once for the process and kept: the
 * drivers load once (lavapipe's LLVM set-up is slow), and a driver that keeps allocations in its
 * globals never has them stranded by an unload. */
static struct {
    pthread_once_t once;
    int rc;
    trit_err err;
    vk_fns f; /* the global and instance levels */
    VkInstance inst;
    VkPhysicalDevice *devs;
    uint32_t n;
} loader = {.once = PTHREAD_ONCE_INIT};

static int load_instance(trit_err *err) {
    void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return fail(err, "vulkan: no loader (libvulkan.so.1): %s", dlerror());
    PFN_vkGetInstanceProcAddr gipa;
    *(void **)&gipa = dlsym(lib, "vkGetInstanceProcAddr");
    if (!gipa) return fail(err, "vulkan: the loader has no vkGetInstanceProcAddr");
    vk_fns *f = &loader.f;
#define VK_LOAD_GLOBAL(fn) f->fn = (PFN_##fn)gipa(NULL, #fn);
    VK_GLOBAL_FNS(VK_LOAD_GLOBAL)
    if (!f->vkCreateInstance) return fail(err, "vulkan: the loader has no vkCreateInstance");
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO, .pApplicationName = "trit", .apiVersion = VK_API_VERSION_1_1};
    VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, .pApplicationInfo = &app};
    VkResult r = f->vkCreateInstance(&ici, NULL, &loader.inst);
    if (r != VK_SUCCESS) return vk_fail(err, "vkCreateInstance", r);
#define VK_LOAD_INSTANCE(fn) \
    if (!(f->fn = (PFN_##fn)gipa(loader.inst, #fn))) return fail(err, "vulkan: no %s", #fn);
    VK_INSTANCE_FNS(VK_LOAD_INSTANCE)
    uint32_t n = 0;
    if ((r = f->vkEnumeratePhysicalDevices(loader.inst, &n, NULL)) != VK_SUCCESS) return vk_fail(err, "enumerate", r);
    if (!n) return fail(err, "vulkan: no device");
    if (!(loader.devs = calloc(n, sizeof *loader.devs))) return fail(err, "out of memory");
    if ((r = f->vkEnumeratePhysicalDevices(loader.inst, &n, loader.devs)) < 0) return vk_fail(err, "enumerate", r);
    loader.n = n;
    return 0;
}

static void load_once(void) { loader.rc = load_instance(&loader.err); }

/* The loader's entry points into c->f; the devices in *devs and *n (the loader's, not to free). */
static int open_instance(vk_ctx *c, const VkPhysicalDevice **devs, uint32_t *n, trit_err *err) {
    pthread_once(&loader.once, load_once);
    if (loader.rc) return fail(err, "%s", loader.err.msg);
#define VK_COPY(fn) c->f.fn = loader.f.fn;
    VK_GLOBAL_FNS(VK_COPY)
    VK_INSTANCE_FNS(VK_COPY)
    *devs = loader.devs, *n = loader.n;
    return 0;
}

/* The device index the environment asks for (TRIT_VK_DEVICE, else GGML_VK_VISIBLE_DEVICES's
 * first entry), else 0. */
static int env_index(void) {
    const char *e = getenv("TRIT_VK_DEVICE");
    if (!e || !*e) e = getenv("GGML_VK_VISIBLE_DEVICES");
    return e && *e >= '0' && *e <= '9' ? atoi(e) : 0;
}

/* The memory a buffer takes, in order of preference (choice k of 2): a mapped one (the work area,
 * the caches the host also reads) device memory the host maps (resizable BAR, unified memory),
 * else host memory the device reads across the bus; an uploaded one (weights) device memory, else
 * the same host memory. The first type among `bits` with choice k's properties, UINT32_MAX when
 * none. */
#define HOST_MEM (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
static uint32_t memory_type(const vk_ctx *c, uint32_t bits, int mapped, int k) {
    const VkMemoryPropertyFlags want = k ? HOST_MEM : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | (mapped ? HOST_MEM : 0);
    for (uint32_t i = 0; i < c->mem.memoryTypeCount; i++)
        if ((bits >> i & 1) && (c->mem.memoryTypes[i].propertyFlags & want) == want) return i;
    return UINT32_MAX;
}

/* A positive whole number from the environment variable name, 0 when it is not set, -1 with err
 * when it is something else. */
static long long env_count(const char *name, trit_err *err) {
    const char *v = getenv(name);
    if (!v || !*v) return 0;
    char *end;
    long long n = strtoll(v, &end, 10);
    return *end || n <= 0 ? fail(err, "vulkan: %s=%s is not a positive whole number", name, v) : n;
}

/* The bytes buffers may take: the heap of the device memory weights go to, less when
 * TRIT_VK_MEMORY (MiB) says so: a smaller device, and how tests run out of memory. */
static int memory_budget(vk_ctx *c, trit_err *err) {
    uint32_t type = memory_type(c, UINT32_MAX, 0, 0);
    if (type == UINT32_MAX) type = memory_type(c, UINT32_MAX, 0, 1);
    c->budget = type < c->mem.memoryTypeCount ? c->mem.memoryHeaps[c->mem.memoryTypes[type].heapIndex].size : 0;
    const long long mib = env_count("TRIT_VK_MEMORY", err), lose = env_count("TRIT_VK_LOSE_AFTER", err);
    if (mib < 0 || lose < 0) return -1;
    if (mib && (uint64_t)mib << 20 < c->budget) c->budget = (uint64_t)mib << 20;
    c->lose_after = getenv("TRIT_VK_LOSE_AFTER") ? (long)lose : -1;
    return 0;
}

/* Whether the device has VK_KHR_shader_integer_dot_product with its feature on. */
static int probe_int_dot(vk_ctx *c) {
    uint32_t n = 0;
    if (c->f.vkEnumerateDeviceExtensionProperties(c->phys, NULL, &n, NULL) || !n) return 0;
    VkExtensionProperties *ext = calloc(n, sizeof *ext);
    int found = 0;
    if (ext && !c->f.vkEnumerateDeviceExtensionProperties(c->phys, NULL, &n, ext))
        for (uint32_t i = 0; i < n; i++)
            found |= !strcmp(ext[i].extensionName, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    free(ext);
    if (!found) return 0;
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &dot};
    c->f.vkGetPhysicalDeviceFeatures2(c->phys, &f2);
    return dot.shaderIntegerDotProduct == VK_TRUE;
}

static int open_device(vk_ctx *c, trit_err *err) {
    uint32_t nq = 0;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, NULL);
    VkQueueFamilyProperties qf[16];
    nq = nq < 16 ? nq : 16;
    c->f.vkGetPhysicalDeviceQueueFamilyProperties(c->phys, &nq, qf);
    c->family = UINT32_MAX;
    for (uint32_t i = 0; i < nq && c->family == UINT32_MAX; i++)
        if (qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) c->family = i;
    if (c->family == UINT32_MAX) return fail(err, "vulkan: %s has no compute queue", c->name);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                   .queueFamilyIndex = c->family,
                                   .queueCount = 1,
                                   .pQueuePriorities = &prio};
    c->has_int_dot = probe_int_dot(c);
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .shaderIntegerDotProduct = VK_TRUE};
    const char *ext = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                              .pNext = c->has_int_dot ? &dot : NULL,
                              .queueCreateInfoCount = 1,
                              .pQueueCreateInfos = &qci,
                              .enabledExtensionCount = c->has_int_dot ? 1 : 0,
                              .ppEnabledExtensionNames = c->has_int_dot ? &ext : NULL};
    VkResult r = c->f.vkCreateDevice(c->phys, &dci, NULL, &c->dev);
    if (r != VK_SUCCESS) return vk_fail(err, "vkCreateDevice", r);
#define VK_LOAD_DEVICE(fn) \
    if (!(c->f.fn = (PFN_##fn)c->f.vkGetDeviceProcAddr(c->dev, #fn))) return fail(err, "vulkan: no %s", #fn);
    VK_DEVICE_FNS(VK_LOAD_DEVICE)
    c->f.vkGetDeviceQueue(c->dev, c->family, 0, &c->queue);
    c->f.vkGetPhysicalDeviceMemoryProperties(c->phys, &c->mem);
    if (memory_budget(c, err)) return -1;
    const char *no = getenv("TRIT_VK_NO_INT_DOT"); /* the plain path on any device: a knob, and how CI runs both */
    c->int_dot = c->has_int_dot && !(no && *no && strcmp(no, "0"));
    return 0;
}

/* What every kernel shares: a layout of BINDINGS storage buffers and PUSH_BYTES of push
 * constants, a descriptor pool, one command buffer and its fence. */
static int open_shared(vk_ctx *c, trit_err *err) {
    VkDescriptorSetLayoutBinding b[BINDINGS];
    for (int i = 0; i < BINDINGS; i++)
        b[i] = (VkDescriptorSetLayoutBinding){.binding = (uint32_t)i,
                                              .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                              .descriptorCount = 1,
                                              .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dl = {
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = BINDINGS, .pBindings = b};
    VkPushConstantRange pc = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = PUSH_BYTES};
    VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &c->dsl,
                                     .pushConstantRangeCount = 1,
                                     .pPushConstantRanges = &pc};
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = BINDINGS * MAX_SETS};
    VkDescriptorPoolCreateInfo dp = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = MAX_SETS,
                                     .poolSizeCount = 1,
                                     .pPoolSizes = &ps};
    VkCommandPoolCreateInfo cp = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = c->family};
    VkFenceCreateInfo fc = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    VkResult r;
    if ((r = c->f.vkCreateDescriptorSetLayout(c->dev, &dl, NULL, &c->dsl)) ||
        (r = c->f.vkCreatePipelineLayout(c->dev, &pl, NULL, &c->layout)) ||
        (r = c->f.vkCreateDescriptorPool(c->dev, &dp, NULL, &c->pool)) ||
        (r = c->f.vkCreateCommandPool(c->dev, &cp, NULL, &c->cmd_pool)) ||
        (r = c->f.vkCreateFence(c->dev, &fc, NULL, &c->fence)))
        return vk_fail(err, "creating the shared objects", r);
    VkCommandBufferAllocateInfo ca = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = c->cmd_pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    if ((r = c->f.vkAllocateCommandBuffers(c->dev, &ca, &c->cmd))) return vk_fail(err, "vkAllocateCommandBuffers", r);
    return 0;
}

vk_ctx *vk_open(int index, trit_err *err) {
    vk_ctx *c = calloc(1, sizeof *c);
    const VkPhysicalDevice *devs = NULL;
    uint32_t n = 0;
    if (!c) return fail(err, "out of memory"), NULL;
    int rc = open_instance(c, &devs, &n, err);
    if (!rc) {
        if (index < 0) index = env_index();
        if ((uint32_t)index >= n) rc = fail(err, "vulkan: no device %d (%u found)", index, n);
    }
    if (!rc) {
        c->phys = devs[index];
        VkPhysicalDeviceProperties pr;
        c->f.vkGetPhysicalDeviceProperties(c->phys, &pr);
        snprintf(c->name, sizeof c->name, "%s", pr.deviceName);
        rc = open_device(c, err) || open_shared(c, err) ? -1 : 0;
        const char *lim = getenv("TRIT_VK_RUN_KERNELS"); /* smaller runs: a knob, and how tests split passes */
        c->run_limit = lim && atoi(lim) >= 64 && atoi(lim) < MAX_SETS ? atoi(lim) : MAX_SETS;
    }
    if (rc) return vk_close(c), NULL;
    return c;
}

void vk_close(vk_ctx *c) {
    if (!c) return;
    if (c->dev) {
        for (int i = 0; i < c->n_pipes; i++) c->f.vkDestroyPipeline(c->dev, c->pipes[i].pipe, NULL);
        if (c->fence) c->f.vkDestroyFence(c->dev, c->fence, NULL);
        if (c->cmd_pool) c->f.vkDestroyCommandPool(c->dev, c->cmd_pool, NULL);
        if (c->pool) c->f.vkDestroyDescriptorPool(c->dev, c->pool, NULL);
        if (c->layout) c->f.vkDestroyPipelineLayout(c->dev, c->layout, NULL);
        if (c->dsl) c->f.vkDestroyDescriptorSetLayout(c->dev, c->dsl, NULL);
        c->f.vkDestroyDevice(c->dev, NULL);
    }
    free(c);
}

const char *vk_device_name(const vk_ctx *c) { return c->name; }

int vk_has_int_dot(const vk_ctx *c) { return c->has_int_dot; }
int vk_use_int_dot(vk_ctx *c, int on) {
    c->int_dot = on && c->has_int_dot;
    return c->int_dot;
}

int vk_list_devices(char *buf, size_t n, trit_err *err) {
    vk_ctx c = {0};
    const VkPhysicalDevice *devs = NULL;
    uint32_t nd = 0;
    int rc = open_instance(&c, &devs, &nd, err);
    size_t used = 0;
    if (n) buf[0] = 0;
    for (uint32_t i = 0; !rc && i < nd; i++) {
        VkPhysicalDeviceProperties pr;
        c.f.vkGetPhysicalDeviceProperties(devs[i], &pr);
        int k = snprintf(buf + used, used < n ? n - used : 0, "%u: %s\n", i, pr.deviceName);
        used += k > 0 ? (size_t)k : 0;
    }
    return rc;
}

/* ---- buffers ---- */

/* A buffer of bytes for usage in mapped or device memory (see memory_type), falling back to host
 * memory when the first choice is full; counted against the budget unless it is staging. */
static vk_buf *buf_create(vk_ctx *c, size_t bytes, VkBufferUsageFlags usage, int mapped, int counted, trit_err *err) {
    vk_buf *b = calloc(1, sizeof *b);
    if (!b) return fail(err, "out of memory"), NULL;
    b->c = c, b->bytes = bytes;
    VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                             .size = (bytes + 3) / 4 * 4 + 4 * !bytes, /* the shaders read words */
                             .usage = usage,
                             .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
    VkResult r = c->f.vkCreateBuffer(c->dev, &bi, NULL, &b->buf);
    if (r) return vk_fail(err, "vkCreateBuffer", r), vk_buf_free(b), NULL;
    VkMemoryRequirements req;
    c->f.vkGetBufferMemoryRequirements(c->dev, b->buf, &req);
    if (counted && req.size > c->budget - c->used)
        return fail(err, "vulkan: out of device memory: %.1f MiB more, with %.1f of %.1f MiB in use", req.size / MIB,
                    c->used / MIB, c->budget / MIB),
               vk_buf_free(b), NULL;
    uint32_t type = UINT32_MAX;
    r = VK_ERROR_OUT_OF_DEVICE_MEMORY;
    for (int k = 0; k < 2 && r; k++) {
        const uint32_t t = memory_type(c, req.memoryTypeBits, mapped, k);
        if (t == UINT32_MAX || t == type) continue;
        VkMemoryAllocateInfo ai = {
            .sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .allocationSize = req.size, .memoryTypeIndex = t};
        r = c->f.vkAllocateMemory(c->dev, &ai, NULL, &b->mem);
        type = t;
    }
    if (type == UINT32_MAX)
        return fail(err, "vulkan: %s has no host-visible memory for buffers", c->name), vk_buf_free(b), NULL;
    if (r)
        return fail(err, "vulkan: out of device memory: the driver refused %.1f MiB more, with %.1f in use (%d)",
                    req.size / MIB, c->used / MIB, r),
               vk_buf_free(b), NULL;
    if (counted) b->alloc = req.size, c->used += req.size;
    if ((r = c->f.vkBindBufferMemory(c->dev, b->buf, b->mem, 0)))
        return vk_fail(err, "vkBindBufferMemory", r), vk_buf_free(b), NULL;
    if ((c->mem.memoryTypes[type].propertyFlags & HOST_MEM) == HOST_MEM &&
        (r = c->f.vkMapMemory(c->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &b->map)))
        return vk_fail(err, "mapping a buffer", r), vk_buf_free(b), NULL;
    return b;
}

vk_buf *vk_buf_new(vk_ctx *c, size_t bytes, trit_err *err) {
    return buf_create(c, bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, 1, 1, err);
}

static int start(vk_ctx *c, trit_err *err);
static int finish(vk_ctx *c, trit_err *err);

vk_buf *vk_buf_upload(vk_ctx *c, const void *data, size_t bytes, trit_err *err) {
    enum { STAGE = 64 << 20 }; /* the most bytes of host memory one copy stages */
    if (c->recording) return fail(err, "vulkan: an upload while kernels are recorded"), NULL;
    vk_buf *b = buf_create(c, bytes, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT, 0, 1, err);
    vk_buf *st =
        b && bytes ? buf_create(c, bytes < STAGE ? bytes : STAGE, VK_BUFFER_USAGE_TRANSFER_SRC_BIT, 1, 0, err) : NULL;
    int rc = !b || (bytes && !st) ? -1 : 0; /* err says why */
    if (!rc && st && !st->map) rc = fail(err, "vulkan: %s has no host-visible memory for staging", c->name);
    for (size_t off = 0; !rc && off < bytes; off += STAGE) {
        const size_t n = bytes - off < STAGE ? bytes - off : STAGE;
        memcpy(st->map, (const uint8_t *)data + off, n);
        const VkBufferCopy region = {0, off, n};
        if (!(rc = start(c, err))) {
            c->f.vkCmdCopyBuffer(c->cmd, st->buf, b->buf, 1, &region);
            rc = finish(c, err);
        }
    }
    vk_buf_free(st);
    if (rc) vk_buf_free(b);
    return rc ? NULL : b;
}

void vk_buf_free(vk_buf *b) {
    if (!b) return;
    if (b->buf) b->c->f.vkDestroyBuffer(b->c->dev, b->buf, NULL);
    if (b->mem) b->c->f.vkFreeMemory(b->c->dev, b->mem, NULL); /* unmaps it */
    b->c->used -= b->alloc;
    free(b);
}

void *vk_buf_map(vk_buf *b) { return b->map; }
uint64_t vk_memory(const vk_ctx *c, uint64_t *used) {
    if (used) *used = c->used;
    return c->budget;
}
size_t vk_buf_size(const vk_buf *b) { return b->bytes; }

/* ---- pipelines and dispatch ---- */

/* The embedded shader of that name, or NULL. */
static const vk_spirv *shader(const char *name) {
    for (int i = 0; i < vk_spirv_count; i++)
        if (!strcmp(vk_spirv_table[i].name, name)) return &vk_spirv_table[i];
    return NULL;
}

/* A weight type's matrix shader: matmul.comp built for it (the Makefile's VK_MATMUL). */
static int matmul_name(uint32_t type, char *name, size_t n) {
    const type_traits *tt = type_get(type);
    return tt && snprintf(name, n, "matmul_%s", tt->name) < (int)n;
}

static VkPipeline pipeline(vk_ctx *c, const char *name, trit_err *err) {
    for (int i = 0; i < c->n_pipes; i++)
        if (!strcmp(c->pipes[i].name, name)) return c->pipes[i].pipe;
    const vk_spirv *s = shader(name);
    if (!s) return fail(err, "vulkan: no shader %s", name), VK_NULL_HANDLE;
    if (c->n_pipes == MAX_PIPES) return fail(err, "vulkan: too many pipelines"), VK_NULL_HANDLE;
    VkShaderModuleCreateInfo mi = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = s->bytes, .pCode = s->code};
    VkShaderModule mod;
    VkResult r = c->f.vkCreateShaderModule(c->dev, &mi, NULL, &mod);
    if (r) return vk_fail(err, "vkCreateShaderModule", r), VK_NULL_HANDLE;
    VkComputePipelineCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                                                .module = mod,
                                                .pName = "main"},
                                      .layout = c->layout};
    VkPipeline p;
    r = c->f.vkCreateComputePipelines(c->dev, VK_NULL_HANDLE, 1, &pi, NULL, &p);
    c->f.vkDestroyShaderModule(c->dev, mod, NULL);
    if (r) return vk_fail(err, "vkCreateComputePipelines", r), VK_NULL_HANDLE;
    c->pipes[c->n_pipes++] = (vk_pipe){s->name, p};
    return p;
}

/* Starts the command buffer for the kernels that follow. */
static int start(vk_ctx *c, trit_err *err) {
    VkCommandBufferBeginInfo cb = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    VkResult r = c->f.vkResetCommandBuffer(c->cmd, 0);
    if (!r) r = c->f.vkBeginCommandBuffer(c->cmd, &cb);
    if (r) return vk_fail(err, "vkBeginCommandBuffer", r);
    c->recording = 1, c->n_sets = 0;
    return 0;
}

/* Submits what was recorded and waits for it. */
static int finish(vk_ctx *c, trit_err *err) {
    c->recording = 0;
    VkResult r = c->f.vkEndCommandBuffer(c->cmd);
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->cmd};
    if (!r && c->lost) r = VK_ERROR_DEVICE_LOST;
    if (!r) r = c->f.vkQueueSubmit(c->queue, 1, &si, c->fence);
    if (!r) {
        r = c->f.vkWaitForFences(c->dev, 1, &c->fence, VK_TRUE, UINT64_MAX);
        c->f.vkResetFences(c->dev, 1, &c->fence);
    }
    c->f.vkResetDescriptorPool(c->dev, c->pool, 0);
    if (r == VK_ERROR_DEVICE_LOST) c->lost = 1; /* for good: nothing runs on it again */
    if (c->lost) return fail(err, "vulkan: the device %s was lost", c->name);
    return r ? vk_fail(err, "running the kernels", r) : 0;
}

int vk_room(const vk_ctx *c) { return c->run_limit - (c->recording ? c->n_sets : 0); }

int vk_begin(vk_ctx *c, trit_err *err) { return c->recording ? fail(err, "vulkan: already recording") : start(c, err); }

int vk_run(vk_ctx *c, trit_err *err) {
    if (c->recording && c->lose_after >= 0 && c->lose_after-- == 0) c->lost = 1; /* simulated */
    if (c->failed) { /* what was recorded before the failure still runs, so the buffers stay consistent */
        if (c->recording) finish(c, err);
        c->failed = 0;
        return fail(err, "%s", c->why);
    }
    return c->recording ? finish(c, err) : fail(err, "vulkan: nothing is recorded");
}

/* Records shader `name` over groups workgroups (spread over x and y: at most 65535 a
 * dimension) with buffers bound 0 .. BINDINGS - 1 (NULL or past the list: bufs[0] again) and push
 * constants pc, after a barrier on everything recorded before it. Outside vk_begin/vk_run it runs
 * at once. A failure while recording is kept for vk_run to report. */
#define dispatch(c, name, bufs, pc, pc_bytes, groups, err) \
    dispatch_n(c, name, bufs, sizeof bufs / sizeof *bufs, pc, pc_bytes, groups, err)
static int dispatch_n(vk_ctx *c, const char *name, const vk_buf *const *bufs, size_t n_bufs, const void *pc,
                      size_t pc_bytes, uint32_t groups, trit_err *err) {
    const int alone = !c->recording;
    if (alone && start(c, err)) return -1;
    VkPipeline p = pipeline(c, name, err);
    VkDescriptorSet set = VK_NULL_HANDLE;
    VkDescriptorSetAllocateInfo sa = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = c->pool,
                                      .descriptorSetCount = 1,
                                      .pSetLayouts = &c->dsl};
    VkResult r = p ? c->f.vkAllocateDescriptorSets(c->dev, &sa, &set) : VK_SUCCESS;
    if (p && r) fail(err, "vulkan: more than %d kernels in one run (%d)", MAX_SETS, r);
    if (!p || r) {
        if (alone) return finish(c, err), -1;
        snprintf(c->why, sizeof c->why, "%s", err->msg);
        c->failed = 1;
        return -1;
    }
    VkDescriptorBufferInfo bi[BINDINGS];
    VkWriteDescriptorSet wr[BINDINGS];
    for (int i = 0; i < BINDINGS; i++) {
        const vk_buf *b = (size_t)i < n_bufs && bufs[i] ? bufs[i] : bufs[0];
        bi[i] = (VkDescriptorBufferInfo){.buffer = b->buf, .range = VK_WHOLE_SIZE};
        wr[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                       .dstSet = set,
                                       .dstBinding = (uint32_t)i,
                                       .descriptorCount = 1,
                                       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                       .pBufferInfo = &bi[i]};
    }
    c->f.vkUpdateDescriptorSets(c->dev, BINDINGS, wr, 0, NULL);
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
    if (c->n_sets++)
        c->f.vkCmdPipelineBarrier(c->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0,
                                  1, &mb, 0, NULL, 0, NULL);
    uint32_t gx = groups < 65535 ? groups : 65535, gy = (groups + gx - 1) / gx;
    c->f.vkCmdBindPipeline(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p);
    c->f.vkCmdBindDescriptorSets(c->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->layout, 0, 1, &set, 0, NULL);
    c->f.vkCmdPushConstants(c->cmd, c->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, (uint32_t)pc_bytes, pc);
    c->f.vkCmdDispatch(c->cmd, gx ? gx : 1, gy ? gy : 1, 1);
    return alone ? finish(c, err) : 0;
}

/* ---- kernels ---- */

/* A matrix kernel's push constants and workgroups: tpr threads a row, the power of two at or
 * above the row's blocks (float types: runs of 32 values; at most the workgroup's 64), and
 * 64 / tpr rows a workgroup. */
static uint32_t matmul_shape(const type_traits *tt, int rows, int cols, uint32_t rb, int n, uint32_t pc[5]) {
    const uint32_t units = (uint32_t)(tt->blck > 1 ? cols / tt->blck : (cols + 31) / 32);
    uint32_t tpr = 1;
    while (tpr < 64 && tpr < units) tpr *= 2;
    pc[0] = (uint32_t)rows, pc[1] = (uint32_t)cols, pc[2] = rb, pc[3] = (uint32_t)n, pc[4] = tpr;
    return (uint32_t)(((uint64_t)rows * tpr + 63) / 64);
}

int vk_matmul_supported(uint32_t type) {
    char name[32];
    return matmul_name(type, name, sizeof name) && shader(name);
}

/* Type's matrix kernel `name` over w (rows x cols) and n input rows of x (in_bytes each) into y:
 * the bounds both kinds of input share, then the dispatch. */
static int matmul_run(vk_ctx *c, const char *name, uint32_t type, const vk_buf *w, int rows, int cols, const vk_buf *x,
                      size_t in_bytes, int n, vk_buf *y, trit_err *err) {
    const type_traits *tt = type_get(type);
    const uint64_t rb = type_row_bytes(type, cols);
    if (rows <= 0 || n <= 0 || !rb || rb > UINT32_MAX / (uint64_t)rows ||
        (uint64_t)n * (uint64_t)(cols > rows ? cols : rows) > UINT32_MAX)
        return fail(err, "vulkan: a %d x %d %s matrix is out of range", rows, cols, tt->name);
    if (vk_buf_size(w) < rb * (uint64_t)rows || vk_buf_size(x) < (size_t)n * in_bytes ||
        vk_buf_size(y) < (size_t)n * (size_t)rows * 4)
        return fail(err, "vulkan: a matrix kernel's buffer is too small");
    uint32_t pc[5];
    const uint32_t groups = matmul_shape(tt, rows, cols, (uint32_t)rb, n, pc);
    const vk_buf *bufs[3] = {w, x, y};
    return dispatch(c, name, bufs, pc, sizeof pc, groups, err);
}

int vk_matmul(vk_ctx *c, uint32_t type, const vk_buf *w, int rows, int cols, const vk_buf *x, int n, vk_buf *y,
              trit_err *err) {
    char name[32];
    if (!vk_matmul_supported(type)) return fail(err, "vulkan: no matrix kernel for %s", type_name(type));
    matmul_name(type, name, sizeof name);
    return matmul_run(c, name, type, w, rows, cols, x, (size_t)(cols > 0 ? cols : 0) * 4, n, y, err);
}

uint32_t vk_act_type(uint32_t type, int cols) {
    const type_traits *tt = type_get(type);
    char name[40];
    if (!tt || !vk_matmul_supported(type) ||
        snprintf(name, sizeof name, "matmul_q8_%s", tt->name) >= (int)sizeof name || !shader(name))
        return TYPE_F32;
    const uint32_t at = (uint32_t)tt->vec_dot_type;
    return (at == TYPE_Q8_0 || at == TYPE_Q8_K) && cols > 0 && cols % type_get(at)->blck == 0 ? at : TYPE_F32;
}

size_t vk_act_words(uint32_t act_type, int cols) {
    return (size_t)cols / 4 + (size_t)cols / (act_type == TYPE_Q8_0 ? 32 : 256);
}

int vk_quant_act(vk_ctx *c, uint32_t act_type, const vk_buf *x, int rows, int cols, vk_buf *xq, trit_err *err) {
    const int qa = act_type == TYPE_Q8_0 ? 32 : act_type == TYPE_Q8_K ? 256 : 0;
    if (!qa || rows <= 0 || cols <= 0 || cols % qa || vk_buf_size(x) < (size_t)rows * (size_t)cols * 4 ||
        vk_buf_size(xq) < (size_t)rows * vk_act_words(act_type, cols) * 4 ||
        (uint64_t)rows * (uint64_t)cols > UINT32_MAX)
        return fail(err, "vulkan: quantizing %d x %d inputs to %s: out of range", rows, cols, type_name(act_type));
    const uint32_t pc[2] = {(uint32_t)rows, (uint32_t)cols};
    const vk_buf *bufs[2] = {x, xq};
    return dispatch(c, act_type == TYPE_Q8_0 ? "quant_act_Q8_0" : "quant_act_Q8_K", bufs, pc, sizeof pc,
                    (uint32_t)(((size_t)rows * (size_t)(cols / qa) + 63) / 64), err);
}

int vk_matmul_q8(vk_ctx *c, uint32_t type, const vk_buf *w, int rows, int cols, const vk_buf *xq, int n, vk_buf *y,
                 trit_err *err) {
    const uint32_t at = vk_act_type(type, cols);
    if (at == TYPE_F32) return fail(err, "vulkan: no int8 matrix kernel for %s rows of %d", type_name(type), cols);
    char name[40];
    snprintf(name, sizeof name, "matmul_q8%s_%s", c->int_dot ? "dot" : "", type_get(type)->name);
    return matmul_run(c, name, type, w, rows, cols, xq, vk_act_words(at, cols) * 4, n, y, err);
}

/* The number of 64-wide workgroups that cover n. */
static uint32_t groups64(size_t n) { return (uint32_t)((n + 63) / 64); }

static int f32s(const vk_buf *b, size_t n) { return b && vk_buf_size(b) >= n * sizeof(float) && n <= UINT32_MAX; }

int vk_rmsnorm(vk_ctx *c, const vk_buf *x, const vk_buf *w, vk_buf *y, int rows, int n, float eps, trit_err *err) {
    const size_t all = (size_t)rows * (size_t)n;
    if (rows <= 0 || n <= 0 || !f32s(x, all) || !f32s(y, all) || (w && !f32s(w, (size_t)n)))
        return fail(err, "vulkan: rmsnorm of %d x %d: a buffer is too small", rows, n);
    struct {
        uint32_t rows, n, has_w;
        float eps;
    } pc = {(uint32_t)rows, (uint32_t)n, w != NULL, eps};
    const vk_buf *bufs[3] = {x, w ? w : x, y};
    return dispatch(c, "rmsnorm", bufs, &pc, sizeof pc, (uint32_t)rows, err);
}

int vk_swiglu(vk_ctx *c, vk_buf *g, const vk_buf *u, size_t n, trit_err *err) {
    if (!f32s(g, n) || !f32s(u, n)) return fail(err, "vulkan: swiglu: a buffer is too small");
    const uint32_t pc = (uint32_t)n;
    const vk_buf *bufs[2] = {g, u};
    return dispatch(c, "swiglu", bufs, &pc, sizeof pc, groups64(n), err);
}

int vk_add(vk_ctx *c, vk_buf *y, const vk_buf *x, size_t n, trit_err *err) {
    if (!f32s(y, n) || !f32s(x, n)) return fail(err, "vulkan: add: a buffer is too small");
    const uint32_t pc = (uint32_t)n;
    const vk_buf *bufs[2] = {y, x};
    return dispatch(c, "add", bufs, &pc, sizeof pc, groups64(n), err);
}

int vk_rope(vk_ctx *c, vk_buf *x, size_t offset, int n_heads, int head_dim, int n_rot, int pos, float base, int neox,
            trit_err *err) {
    if (n_heads <= 0 || n_rot <= 0 || n_rot % 2 || n_rot > head_dim || pos < 0 ||
        !f32s(x, offset + (size_t)n_heads * (size_t)head_dim))
        return fail(err, "vulkan: rope of %d heads of %d (%d rotating): out of range", n_heads, head_dim, n_rot);
    struct {
        uint32_t n_heads, head_dim, n_rot, pos;
        float step;
        uint32_t neox, offset;
    } pc = {(uint32_t)n_heads, (uint32_t)head_dim, (uint32_t)n_rot, (uint32_t)pos, powf(base, -2.0f / (float)n_rot),
            neox != 0,         (uint32_t)offset};
    const vk_buf *bufs[1] = {x};
    return dispatch(c, "rope", bufs, &pc, sizeof pc, groups64((size_t)n_heads * (size_t)(n_rot / 2)), err);
}

int vk_kv_store(vk_ctx *c, const vk_buf *src, size_t src_off, vk_buf *cache, size_t offset, size_t n, trit_err *err) {
    if (n % 2 || offset % 2 || !f32s(src, src_off + n) || vk_buf_size(cache) < (offset + n) * 2 ||
        offset + n > UINT32_MAX)
        return fail(err, "vulkan: kv store of %zu halves at %zu: out of range", n, offset);
    const uint32_t pc[3] = {(uint32_t)n, (uint32_t)offset, (uint32_t)src_off};
    const vk_buf *bufs[2] = {src, cache};
    return dispatch(c, "kv_store", bufs, pc, sizeof pc, groups64(n / 2), err);
}

int vk_attention(vk_ctx *c, const vk_buf *q, size_t qoff, const vk_buf *k, const vk_buf *v, size_t base, int n_keys,
                 int n_head, int n_head_kv, int head_dim, int f16, vk_buf *scores, vk_buf *out, trit_err *err) {
    const size_t stride = (size_t)n_head_kv * (size_t)head_dim, qdim = (size_t)n_head * (size_t)head_dim;
    const size_t halves = base + (size_t)n_keys * stride;
    if (n_keys <= 0 || n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv || head_dim <= 0 || head_dim % 2 ||
        base % 2 || halves > UINT32_MAX || vk_buf_size(k) < halves * 2 || vk_buf_size(v) < halves * 2 ||
        !f32s(q, qoff + qdim) || !f32s(out, qoff + qdim) || !f32s(scores, (size_t)n_head * (size_t)n_keys))
        return fail(err, "vulkan: attention of %d heads over %d keys: out of range", n_head, n_keys);
    struct {
        uint32_t n_keys, n_head, n_head_kv, head_dim, base, stride, qoff;
        float scale;
        uint32_t f16;
    } pc = {(uint32_t)n_keys, (uint32_t)n_head, (uint32_t)n_head_kv, (uint32_t)head_dim,
            (uint32_t)base,   (uint32_t)stride, (uint32_t)qoff,      1.0f / sqrtf((float)head_dim),
            f16 != 0};
    const vk_buf *sb[3] = {q, k, scores}, *ob[3] = {scores, v, out};
    if (dispatch(c, "attn_scores", sb, &pc, sizeof pc, groups64((size_t)n_head * (size_t)n_keys), err)) return -1;
    return dispatch(c, "attn_out", ob, &pc, sizeof pc, (uint32_t)n_head, err);
}

int vk_read(vk_ctx *c, const vk_buf *a, vk_buf *out, int invocations, trit_err *err) {
    const size_t words = vk_buf_size(a) / 16;
    if (invocations <= 0 || vk_buf_size(out) < (size_t)invocations * 4 || words > UINT32_MAX || !words)
        return fail(err, "vulkan: read of %zu bytes by %d invocations: out of range", vk_buf_size(a), invocations);
    const uint32_t pc[2] = {(uint32_t)words, (uint32_t)invocations};
    const vk_buf *bufs[2] = {a, out};
    return dispatch(c, "read", bufs, pc, sizeof pc, groups64((size_t)invocations), err);
}

int vk_copy_blocks(vk_ctx *c, const vk_buf *src, size_t src_off, size_t src_stride, vk_buf *dst, size_t dst_off,
                   size_t dst_stride, size_t len, size_t count, trit_err *err) {
    const size_t sl = count ? src_off + (count - 1) * src_stride + len : 0,
                 dl = count ? dst_off + (count - 1) * dst_stride + len : 0;
    if (!len || !count || !f32s(src, sl) || !f32s(dst, dl) || len * count > UINT32_MAX)
        return fail(err, "vulkan: copy of %zu blocks of %zu floats: out of range", count, len);
    const uint32_t pc[6] = {(uint32_t)len,        (uint32_t)count,   (uint32_t)src_off,
                            (uint32_t)src_stride, (uint32_t)dst_off, (uint32_t)dst_stride};
    const vk_buf *bufs[2] = {src, dst};
    return dispatch(c, "copy", bufs, pc, sizeof pc, groups64(len * count), err);
}

int vk_gate(vk_ctx *c, vk_buf *y, const vk_buf *g, size_t n, size_t len, size_t stride, size_t off, trit_err *err) {
    if (!n || !len || n % len || !f32s(y, n) || !f32s(g, (n / len - 1) * stride + off + len))
        return fail(err, "vulkan: gate of %zu floats: out of range", n);
    const uint32_t pc[4] = {(uint32_t)n, (uint32_t)len, (uint32_t)stride, (uint32_t)off};
    const vk_buf *bufs[2] = {y, g};
    return dispatch(c, "gate", bufs, pc, sizeof pc, groups64(n), err);
}

int vk_hadamard(vk_ctx *c, const vk_buf *src, const vk_buf *signs, size_t signs_off, vk_buf *dst, int rows, int width,
                int block, int inverse, trit_err *err) {
    const size_t all = (size_t)rows * (size_t)width;
    if (rows <= 0 || block < 2 || block > VK_HADAMARD_MAX || (block & (block - 1)) || width % block ||
        !f32s(src, all) || !f32s(dst, all) || (signs && !f32s(signs, signs_off + (size_t)width)))
        return fail(err, "vulkan: Hadamard transform of %d x %d in blocks of %d: out of range", rows, width, block);
    struct {
        uint32_t rows, width, block, has_signs, signs_off, inverse;
        float scale;
    } pc = {(uint32_t)rows,      (uint32_t)width, (uint32_t)block,           signs != NULL,
            (uint32_t)signs_off, inverse != 0,    1.0f / sqrtf((float)block)};
    const vk_buf *bufs[3] = {src, signs ? signs : src, dst};
    return dispatch(c, "hadamard", bufs, &pc, sizeof pc, (uint32_t)(all / (size_t)block), err);
}

int vk_conv(vk_ctx *c, vk_buf *x, int row0, int run, int stride, vk_buf *state, size_t state_off, const vk_buf *w,
            int channels, int K, trit_err *err) {
    if (row0 < 0 || run <= 0 || channels <= 0 || channels > stride || K < 1 ||
        !f32s(x, (size_t)(row0 + run) * (size_t)stride) || !f32s(w, (size_t)channels * (size_t)K) ||
        !f32s(state, state_off + (size_t)channels * (size_t)(K - 1)))
        return fail(err, "vulkan: convolution of %d channels over %d rows: out of range", channels, run);
    const uint32_t pc[6] = {(uint32_t)channels, (uint32_t)K,      (uint32_t)row0,
                            (uint32_t)run,      (uint32_t)stride, (uint32_t)state_off};
    const vk_buf *bufs[3] = {x, state, w};
    return dispatch(c, "conv", bufs, pc, sizeof pc, groups64((size_t)channels), err);
}

int vk_l2norm(vk_ctx *c, vk_buf *x, int rows, int d, int per_row, int stride, int n_scaled, float scale, float eps,
              trit_err *err) {
    if (rows <= 0 || d <= 0 || per_row <= 0 || (size_t)per_row * (size_t)d > (size_t)stride ||
        !f32s(x, (size_t)rows * (size_t)stride))
        return fail(err, "vulkan: l2 norm of %d x %d heads: out of range", rows, per_row);
    struct {
        uint32_t groups, d, per_row, stride, n_scaled;
        float scale, eps;
    } pc = {
        (uint32_t)(rows * per_row), (uint32_t)d, (uint32_t)per_row, (uint32_t)stride, (uint32_t)n_scaled, scale, eps};
    const vk_buf *bufs[1] = {x};
    return dispatch(c, "l2norm", bufs, &pc, sizeof pc, pc.groups, err);
}

int vk_delta(vk_ctx *c, int chunked, const vk_buf *xc, const vk_buf *ab, const vk_buf *par, vk_buf *state,
             size_t state_off, vk_buf *out, int row0, int run, int nb, int d, int n_k, int n_v, trit_err *err) {
    const size_t conv_dim = (size_t)(2 * n_k + n_v) * (size_t)d;
    if (row0 < 0 || run <= 0 || row0 + run > nb || d <= 0 || n_k <= 0 || n_v <= 0 || !f32s(xc, (size_t)nb * conv_dim) ||
        !f32s(ab, 2 * (size_t)nb * (size_t)n_v) || !f32s(par, 2 * (size_t)n_v) ||
        !f32s(state, state_off + (size_t)n_v * (size_t)d * (size_t)d) ||
        !f32s(out, (size_t)nb * (size_t)n_v * (size_t)d))
        return fail(err, "vulkan: delta rule of %d heads over %d rows: out of range", n_v, run);
    const uint32_t pc[8] = {(uint32_t)row0, (uint32_t)run, (uint32_t)nb,       (uint32_t)d,
                            (uint32_t)n_k,  (uint32_t)n_v, (uint32_t)conv_dim, (uint32_t)state_off};
    const vk_buf *bufs[5] = {xc, ab, par, state, out};
    return dispatch(c, chunked ? "delta_chunk" : "delta", bufs, pc, sizeof pc, (uint32_t)n_v, err);
}

int vk_gdn_norm(vk_ctx *c, const vk_buf *o, const vk_buf *w, const vk_buf *z, vk_buf *dst, int rows, int d, int n_v,
                int n_k, int grouped, float eps, trit_err *err) {
    const size_t all = (size_t)rows * (size_t)n_v * (size_t)d;
    if (rows <= 0 || d <= 0 || n_k <= 0 || n_v % n_k || !f32s(o, all) || !f32s(z, all) || !f32s(dst, all) ||
        !f32s(w, (size_t)d))
        return fail(err, "vulkan: gated norm of %d x %d heads: out of range", rows, n_v);
    struct {
        uint32_t groups, d, n_v, n_k, grouped;
        float eps;
    } pc = {(uint32_t)(rows * n_v), (uint32_t)d, (uint32_t)n_v, (uint32_t)n_k, grouped != 0, eps};
    const vk_buf *bufs[4] = {o, w, z, dst};
    return dispatch(c, "gdn_norm", bufs, &pc, sizeof pc, pc.groups, err);
}
