/* A stand-in libcupti for the CPU tests of the observer's loading: it accepts a subscriber (or refuses
 * it, with FAKE_CUPTI_BUSY=1, as CUPTI does when a profiler already holds it) and never calls back.
 * TEST DOUBLE: it observes nothing. */
#include <cupti.h>
#include <stdlib.h>

CUptiResult cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata)
{
    (void)callback;
    (void)userdata;
    if (getenv("FAKE_CUPTI_BUSY"))
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    *subscriber = (CUpti_SubscriberHandle)0x1;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                                CUpti_CallbackId cbid)
{
    (void)enable;
    (void)subscriber;
    (void)domain;
    (void)cbid;
    return CUPTI_SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult result, const char **str)
{
    *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
    return CUPTI_SUCCESS;
}
