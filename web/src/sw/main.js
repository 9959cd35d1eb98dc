// The service worker's entry, bundled by web/build.mjs to web/dist/sw.js and served at
// /sw.js. Push handling lives in push.js.

import { installPush } from './push.js';

installPush(self);
