'use strict';
const test = require('node:test');
const assert = require('node:assert');
const { slugify } = require('../src/slug.js');

test('lower case and dashes', () => {
  assert.strictEqual(slugify('Hello World'), 'hello-world');
});
